//! One-sided communication, notifications and queues. Posting calls do not block: a full
//! queue is `GASPI_QUEUE_FULL` at once (as in the reference implementation), so their
//! `timeout_ms` is accepted and not needed.

use rt::{ListElem, Local, NotificationId, QueueId, Rank, Remote, Result, SegmentId, Timeout};

use crate::ffi::{need, out, read_array, with_ctx};
use crate::gaspi_api;
use crate::types::*;

/// The `num` elements of a list operation from its five parallel arrays.
fn list(
    num: gaspi_number_t,
    seg_local: *const gaspi_segment_id_t,
    off_local: *const gaspi_offset_t,
    seg_remote: *const gaspi_segment_id_t,
    off_remote: *const gaspi_offset_t,
    size: *const gaspi_size_t,
) -> Result<Vec<ListElem>> {
    let n = num as usize;
    let sl = read_array(seg_local, n, "segment_id_local")?;
    let ol = read_array(off_local, n, "offset_local")?;
    let sr = read_array(seg_remote, n, "segment_id_remote")?;
    let or = read_array(off_remote, n, "offset_remote")?;
    let sz = read_array(size, n, "size")?;
    Ok((0..n)
        .map(|i| ListElem {
            local: Local::new(SegmentId(sl[i]), ol[i]),
            remote_segment: SegmentId(sr[i]),
            remote_offset: or[i],
            size: sz[i],
        })
        .collect())
}

gaspi_api! { COMM_API;
    fn gaspi_write(
        segment_id_local: gaspi_segment_id_t,
        offset_local: gaspi_offset_t,
        rank: gaspi_rank_t,
        segment_id_remote: gaspi_segment_id_t,
        offset_remote: gaspi_offset_t,
        size: gaspi_size_t,
        queue: gaspi_queue_id_t,
        timeout_ms: gaspi_timeout_t,
    ) {
        let _ = timeout_ms;
        with_ctx(|c| c.write(
            Local::new(SegmentId(segment_id_local), offset_local),
            Remote::new(Rank(rank), SegmentId(segment_id_remote), offset_remote),
            size,
            QueueId(queue),
        ))
    }

    fn gaspi_read(
        segment_id_local: gaspi_segment_id_t,
        offset_local: gaspi_offset_t,
        rank: gaspi_rank_t,
        segment_id_remote: gaspi_segment_id_t,
        offset_remote: gaspi_offset_t,
        size: gaspi_size_t,
        queue: gaspi_queue_id_t,
        timeout_ms: gaspi_timeout_t,
    ) {
        let _ = timeout_ms;
        with_ctx(|c| c.read(
            Local::new(SegmentId(segment_id_local), offset_local),
            Remote::new(Rank(rank), SegmentId(segment_id_remote), offset_remote),
            size,
            QueueId(queue),
        ))
    }

    fn gaspi_write_notify(
        segment_id_local: gaspi_segment_id_t,
        offset_local: gaspi_offset_t,
        rank: gaspi_rank_t,
        segment_id_remote: gaspi_segment_id_t,
        offset_remote: gaspi_offset_t,
        size: gaspi_size_t,
        notification_id: gaspi_notification_id_t,
        notification_value: gaspi_notification_t,
        queue: gaspi_queue_id_t,
        timeout_ms: gaspi_timeout_t,
    ) {
        let _ = timeout_ms;
        with_ctx(|c| c.write_notify(
            Local::new(SegmentId(segment_id_local), offset_local),
            Remote::new(Rank(rank), SegmentId(segment_id_remote), offset_remote),
            size,
            NotificationId(notification_id),
            notification_value,
            QueueId(queue),
        ))
    }

    fn gaspi_read_notify(
        segment_id_local: gaspi_segment_id_t,
        offset_local: gaspi_offset_t,
        rank: gaspi_rank_t,
        segment_id_remote: gaspi_segment_id_t,
        offset_remote: gaspi_offset_t,
        size: gaspi_size_t,
        notification_id: gaspi_notification_id_t,
        queue: gaspi_queue_id_t,
        timeout_ms: gaspi_timeout_t,
    ) {
        let _ = timeout_ms;
        with_ctx(|c| c.read_notify(
            Local::new(SegmentId(segment_id_local), offset_local),
            Remote::new(Rank(rank), SegmentId(segment_id_remote), offset_remote),
            size,
            NotificationId(notification_id),
            QueueId(queue),
        ))
    }

    fn gaspi_write_list(
        num: gaspi_number_t,
        segment_id_local: *mut gaspi_segment_id_t,
        offset_local: *mut gaspi_offset_t,
        rank: gaspi_rank_t,
        segment_id_remote: *mut gaspi_segment_id_t,
        offset_remote: *mut gaspi_offset_t,
        size: *mut gaspi_size_t,
        queue: gaspi_queue_id_t,
        timeout_ms: gaspi_timeout_t,
    ) {
        let _ = timeout_ms;
        let l = list(num, segment_id_local, offset_local, segment_id_remote, offset_remote, size)?;
        with_ctx(|c| c.write_list(Rank(rank), &l, QueueId(queue)))
    }

    fn gaspi_read_list(
        num: gaspi_number_t,
        segment_id_local: *mut gaspi_segment_id_t,
        offset_local: *mut gaspi_offset_t,
        rank: gaspi_rank_t,
        segment_id_remote: *mut gaspi_segment_id_t,
        offset_remote: *mut gaspi_offset_t,
        size: *mut gaspi_size_t,
        queue: gaspi_queue_id_t,
        timeout_ms: gaspi_timeout_t,
    ) {
        let _ = timeout_ms;
        let l = list(num, segment_id_local, offset_local, segment_id_remote, offset_remote, size)?;
        with_ctx(|c| c.read_list(Rank(rank), &l, QueueId(queue)))
    }

    fn gaspi_write_list_notify(
        num: gaspi_number_t,
        segment_id_local: *mut gaspi_segment_id_t,
        offset_local: *mut gaspi_offset_t,
        rank: gaspi_rank_t,
        segment_id_remote: *mut gaspi_segment_id_t,
        offset_remote: *mut gaspi_offset_t,
        size: *mut gaspi_size_t,
        segment_id_notification: gaspi_segment_id_t,
        notification_id: gaspi_notification_id_t,
        notification_value: gaspi_notification_t,
        queue: gaspi_queue_id_t,
        timeout_ms: gaspi_timeout_t,
    ) {
        let _ = timeout_ms;
        let l = list(num, segment_id_local, offset_local, segment_id_remote, offset_remote, size)?;
        with_ctx(|c| c.write_list_notify(
            Rank(rank),
            &l,
            SegmentId(segment_id_notification),
            NotificationId(notification_id),
            notification_value,
            QueueId(queue),
        ))
    }

    fn gaspi_read_list_notify(
        num: gaspi_number_t,
        segment_id_local: *mut gaspi_segment_id_t,
        offset_local: *mut gaspi_offset_t,
        rank: gaspi_rank_t,
        segment_id_remote: *mut gaspi_segment_id_t,
        offset_remote: *mut gaspi_offset_t,
        size: *mut gaspi_size_t,
        segment_id_notification: gaspi_segment_id_t,
        notification_id: gaspi_notification_id_t,
        queue: gaspi_queue_id_t,
        timeout_ms: gaspi_timeout_t,
    ) {
        let _ = timeout_ms;
        let l = list(num, segment_id_local, offset_local, segment_id_remote, offset_remote, size)?;
        with_ctx(|c| c.read_list_notify(
            Rank(rank),
            &l,
            SegmentId(segment_id_notification),
            NotificationId(notification_id),
            QueueId(queue),
        ))
    }

    fn gaspi_wait(queue: gaspi_queue_id_t, timeout_ms: gaspi_timeout_t) {
        with_ctx(|c| c.wait(QueueId(queue), Timeout(timeout_ms)))
    }

    fn gaspi_notify(
        segment_id_remote: gaspi_segment_id_t,
        rank: gaspi_rank_t,
        notification_id: gaspi_notification_id_t,
        notification_value: gaspi_notification_t,
        queue: gaspi_queue_id_t,
        timeout_ms: gaspi_timeout_t,
    ) {
        let _ = timeout_ms;
        with_ctx(|c| c.notify(
            SegmentId(segment_id_remote),
            Rank(rank),
            NotificationId(notification_id),
            notification_value,
            QueueId(queue),
        ))
    }

    fn gaspi_notify_waitsome(
        segment_id_local: gaspi_segment_id_t,
        notification_begin: gaspi_notification_id_t,
        num: gaspi_number_t,
        first_id: *mut gaspi_notification_id_t,
        timeout_ms: gaspi_timeout_t,
    ) {
        need(first_id, "first_id")?;
        with_ctx(|c| {
            // Waiting for none returns at once with `*first_id` untouched, as in GPI-2
            // (src/GPI2_IO.c checks the segment, then returns before touching it): no
            // notification was found, so there is no id to report. The Rust call refuses
            // `num == 0` instead (it has no way to say "no id").
            if num == 0 {
                return c.segment_ptr(SegmentId(segment_id_local)).map(drop);
            }
            let id = c.notify_waitsome(
                SegmentId(segment_id_local),
                NotificationId(notification_begin),
                num,
                Timeout(timeout_ms),
            )?;
            out(first_id, "first_id", id.0)
        })
    }

    fn gaspi_notify_reset(
        segment_id_local: gaspi_segment_id_t,
        notification_id: gaspi_notification_id_t,
        old_notification_val: *mut gaspi_notification_t,
    ) {
        // GPI-2 takes NULL here: the old value is then not returned.
        with_ctx(|c| {
            let v = c.notify_reset(SegmentId(segment_id_local), NotificationId(notification_id))?;
            if old_notification_val.is_null() {
                return Ok(());
            }
            out(old_notification_val, "old_notification_val", v)
        })
    }

    fn gaspi_notification_num(notification_num: *mut gaspi_number_t) {
        need(notification_num, "notification_num")?;
        with_ctx(|c| out(notification_num, "notification_num", c.notification_num()))
    }

    fn gaspi_queue_size(queue: gaspi_queue_id_t, queue_size: *mut gaspi_number_t) {
        need(queue_size, "queue_size")?;
        with_ctx(|c| out(queue_size, "queue_size", c.queue_size(QueueId(queue))?))
    }

    fn gaspi_queue_num(queue_num: *mut gaspi_number_t) {
        need(queue_num, "queue_num")?;
        with_ctx(|c| out(queue_num, "queue_num", c.queue_num()))
    }

    fn gaspi_queue_size_max(queue_size_max: *mut gaspi_number_t) {
        need(queue_size_max, "queue_size_max")?;
        with_ctx(|c| out(queue_size_max, "queue_size_max", c.queue_size_max()))
    }

    fn gaspi_queue_max(queue_max: *mut gaspi_number_t) {
        need(queue_max, "queue_max")?;
        with_ctx(|c| out(queue_max, "queue_max", c.queue_max()))
    }

    fn gaspi_queue_create(queue: *mut gaspi_queue_id_t, timeout_ms: gaspi_timeout_t) {
        let _ = timeout_ms;
        need(queue, "queue")?;
        with_ctx(|c| out(queue, "queue", c.queue_create()?.0))
    }

    fn gaspi_queue_delete(queue: gaspi_queue_id_t) {
        with_ctx(|c| c.queue_delete(QueueId(queue)))
    }

    fn gaspi_queue_purge(queue: gaspi_queue_id_t, timeout_ms: gaspi_timeout_t) {
        with_ctx(|c| c.queue_purge(QueueId(queue), Timeout(timeout_ms)))
    }
}
