//! The real device, on `sideway` (which loads `libibverbs.so.1` at run time: on a host
//! without it, or without an active port, [`IbvDevice::open`] says why and the rank uses
//! TCP). Only this file talks to libibverbs; the `unsafe` blocks are the calls that hand raw
//! segment addresses to the device.
//!
//! Not yet run on InfiniBand or RoCE hardware (none is available to the project); it builds
//! in CI and falls back cleanly on hosts without devices.

use std::sync::Arc;

use parking_lot::Mutex;
use sideway::ibverbs::address::{AddressHandleAttribute, Gid};
use sideway::ibverbs::completion::{
    ExtendedCompletionQueue, GenericCompletionQueue, WorkCompletionStatus,
};
use sideway::ibverbs::device::{DeviceInfo, DeviceList};
use sideway::ibverbs::device_context::{DeviceContext, LinkLayer, Mtu, PortState};
use sideway::ibverbs::memory_region::MemoryRegion as IbvMr;
use sideway::ibverbs::protection_domain::ProtectionDomain;
use sideway::ibverbs::queue_pair::{
    ExtendedQueuePair, PostSendGuard, QueuePair as _, QueuePairAttribute, QueuePairState,
    SendOperationFlags, SetInlineData, SetScatterGatherEntry, WorkRequestFlags,
};
use sideway::ibverbs::AccessFlags;

use super::device::{
    Completion, CompletionQueue, Device, DeviceChoice, MemoryRegion, MrKeys, PortAddr, QpEndpoint,
    QueuePair, RecvRequest, Region, WorkRequest, WrOp,
};
use crate::error::{Error, Result};

const MAX_RD_ATOMIC: u8 = 16;

pub(crate) struct IbvDevice {
    ctx: Arc<DeviceContext>,
    pd: Arc<ProtectionDomain>,
    name: String,
    port: PortAddr,
    max_qp_wr: u32,
    max_rd_atomic: u8,
}

fn mtu_bytes(m: Mtu) -> u32 {
    match m {
        Mtu::Mtu256 => 256,
        Mtu::Mtu512 => 512,
        Mtu::Mtu1024 => 1024,
        Mtu::Mtu2048 => 2048,
        Mtu::Mtu4096 => 4096,
    }
}

fn mtu_of(bytes: u32) -> Mtu {
    match bytes {
        0..=256 => Mtu::Mtu256,
        257..=512 => Mtu::Mtu512,
        513..=1024 => Mtu::Mtu1024,
        1025..=2048 => Mtu::Mtu2048,
        _ => Mtu::Mtu4096,
    }
}

impl IbvDevice {
    /// The chosen device and port (first active port by default), or why there is none.
    pub fn open(choice: &DeviceChoice) -> std::result::Result<IbvDevice, String> {
        let list = DeviceList::new()
            .map_err(|e| format!("libibverbs is not available or lists no devices: {e}"))?;
        if list.is_empty() {
            return Err("no InfiniBand/RoCE devices".into());
        }
        let mut tried = Vec::new();
        for dev in list.iter() {
            let name = dev.name();
            if choice.device.as_ref().is_some_and(|d| *d != name) {
                continue;
            }
            let ctx = match dev.open() {
                Ok(c) => c,
                Err(e) => {
                    tried.push(format!("{name}: cannot open: {e}"));
                    continue;
                }
            };
            let attr = match ctx.query_device() {
                Ok(a) => a,
                Err(e) => {
                    tried.push(format!("{name}: cannot query: {e}"));
                    continue;
                }
            };
            let ports: Vec<u8> = match choice.port {
                Some(p) => vec![p],
                None => (1..=attr.phys_port_cnt()).collect(),
            };
            for p in ports {
                let pa = match ctx.query_port(p) {
                    Ok(pa) => pa,
                    Err(e) => {
                        tried.push(format!("{name} port {p}: {e}"));
                        continue;
                    }
                };
                if pa.port_state() != PortState::Active {
                    tried.push(format!("{name} port {p}: not active"));
                    continue;
                }
                let roce = pa.link_layer() == LinkLayer::Ethernet;
                let gid = match ctx.query_gid(p, u32::from(choice.gid_index)) {
                    Ok(g) => g.raw,
                    Err(e) if roce => {
                        tried.push(format!("{name} port {p}: GID {}: {e}", choice.gid_index));
                        continue;
                    }
                    Err(_) => [0; 16],
                };
                let pd = ctx
                    .alloc_pd()
                    .map_err(|e| format!("{name}: protection domain: {e}"))?;
                return Ok(IbvDevice {
                    name: name.clone(),
                    port: PortAddr {
                        lid: pa.lid(),
                        gid,
                        gid_index: choice.gid_index,
                        port: p,
                        roce,
                        mtu: mtu_bytes(pa.active_mtu()),
                    },
                    max_qp_wr: attr.max_qp_wr().max(2) as u32,
                    max_rd_atomic: (attr.max_qp_rd_atom().clamp(1, i32::from(MAX_RD_ATOMIC))) as u8,
                    ctx,
                    pd,
                });
            }
        }
        if tried.is_empty() {
            Err(format!(
                "no device named {:?}",
                choice.device.as_deref().unwrap_or("")
            ))
        } else {
            Err(format!("no active port ({})", tried.join("; ")))
        }
    }
}

struct IbvRegion {
    mr: Arc<IbvMr>,
    /// Registrations are not zero-based: device addresses are virtual addresses.
    base: u64,
}

impl MemoryRegion for IbvRegion {
    fn keys(&self) -> MrKeys {
        MrKeys {
            lkey: self.mr.lkey(),
            rkey: self.mr.rkey(),
            base: self.base,
        }
    }
}

struct IbvCq {
    cq: Arc<ExtendedCompletionQueue>,
    /// libibverbs allows one poller per completion queue at a time.
    polling: Mutex<()>,
}

impl CompletionQueue for IbvCq {
    fn into_any(self: Arc<Self>) -> Arc<dyn std::any::Any + Send + Sync> {
        self
    }

    fn poll(&self, out: &mut Vec<Completion>, max: usize) -> Result<()> {
        let _one = self.polling.lock();
        let Ok(poller) = self.cq.start_poll() else {
            return Ok(()); // empty (or a transient error the next poll reports again)
        };
        for wc in poller.take(max) {
            let status = wc.status();
            let ok = status == WorkCompletionStatus::Success as u32;
            out.push(Completion {
                wr_id: wc.wr_id(),
                status: if ok {
                    Ok(())
                } else {
                    Err(format!(
                        "work completion status {:?} ({status})",
                        WorkCompletionStatus::from(status)
                    ))
                },
                // Only valid on success (`ibv_wc_read_byte_len`); the CQ is created with the
                // standard flags, which include the byte length. sideway 0.4 has no reader
                // for the QP number, so receives carry their peer in `wr_id` instead.
                byte_len: if ok { wc.byte_len() } else { 0 },
            });
        }
        Ok(())
    }
}

struct IbvQp {
    qp: ExtendedQueuePair,
    port: PortAddr,
    max_rd_atomic: u8,
}

fn dev_err(what: &str, e: impl std::fmt::Display) -> Error {
    Error::Device(format!("{what}: {e}"))
}

impl QueuePair for IbvQp {
    fn qpn(&self) -> u32 {
        self.qp.qp_number()
    }

    fn connect(&mut self, local_psn: u32, remote: &QpEndpoint) -> Result<()> {
        let access = AccessFlags::LocalWrite
            | AccessFlags::RemoteWrite
            | AccessFlags::RemoteRead
            | AccessFlags::RemoteAtomic;
        let mut init = QueuePairAttribute::new();
        init.setup_state(QueuePairState::Init)
            .setup_pkey_index(0)
            .setup_port(self.port.port)
            .setup_access_flags(access);
        self.qp
            .modify(&init)
            .map_err(|e| dev_err("QP to INIT", e))?;

        let mut ah = AddressHandleAttribute::new();
        ah.setup_dest_lid(remote.addr.lid)
            .setup_port(self.port.port)
            .setup_service_level(0);
        if self.port.roce {
            ah.setup_grh_dest_gid(&Gid {
                raw: remote.addr.gid,
            })
            .setup_grh_src_gid_index(self.port.gid_index)
            .setup_grh_hop_limit(64);
        }
        let mut rtr = QueuePairAttribute::new();
        rtr.setup_state(QueuePairState::ReadyToReceive)
            .setup_path_mtu(mtu_of(self.port.mtu.min(remote.addr.mtu)))
            .setup_dest_qp_num(remote.qpn)
            .setup_rq_psn(remote.psn)
            .setup_max_dest_read_atomic(self.max_rd_atomic)
            .setup_min_rnr_timer(12)
            .setup_address_vector(&ah);
        self.qp.modify(&rtr).map_err(|e| dev_err("QP to RTR", e))?;

        let mut rts = QueuePairAttribute::new();
        rts.setup_state(QueuePairState::ReadyToSend)
            .setup_sq_psn(local_psn)
            .setup_timeout(14)
            .setup_retry_cnt(7)
            // 7 = unlimited: a passive SEND to a peer with no receive buffer free waits
            // (min_rnr_timer 12 = 0.64 ms between tries) until one is reposted;
            // `passive_send` enforces its timeout in software and leaves the SEND queued.
            .setup_rnr_retry(7)
            .setup_max_read_atomic(self.max_rd_atomic);
        self.qp.modify(&rts).map_err(|e| dev_err("QP to RTS", e))
    }

    fn post_send(&mut self, wrs: &[WorkRequest]) -> Result<()> {
        let mut guard = self.qp.start_post_send();
        for wr in wrs {
            let mut flags = if wr.signaled {
                WorkRequestFlags::Signaled
            } else {
                WorkRequestFlags::none()
            };
            if matches!(wr.op, WrOp::WriteInline { .. }) {
                flags |= WorkRequestFlags::Inline;
            }
            let h = guard.construct_wr(wr.wr_id, flags);
            let (rkey, raddr) = (wr.remote.rkey, wr.remote.addr);
            match wr.op {
                WrOp::WriteInline { data } => h.setup_write(rkey, raddr).setup_inline_data(&data),
                // `setup_sge` leaves the buffer's lifetime to us: the device reads (or
                // writes) `[addr, addr+len)` under `lkey` until the request completes.
                //
                // SAFETY: the sge is either a piece of a local segment's data area
                // (`Registry::local_sge`, whose range `check_transfer` bounds-checked
                // against the segment before posting, and which `Pending::_hold` keeps
                // mapped until the completion is retired) or, for the zero-length fence,
                // the start of the registry's scratch region, which lives as long as the
                // transport. The device only reads it.
                WrOp::Write { sge } => unsafe {
                    h.setup_write(rkey, raddr)
                        .setup_sge(sge.lkey, sge.addr, sge.len)
                },
                // SAFETY: the device writes the sge. It is a bounds-checked piece of a local
                // segment's data area, or the notification slot of `read_notify` in that
                // segment's control area (`Registry::local_slot_sge`; the id was checked
                // against the segment's slot count), both kept mapped by `Pending::_hold`;
                // or a directory lookup's scratch slot (32 bytes, `len` = 32), taken off the
                // registry's free list until the result was read and never released while
                // the read may still land.
                WrOp::Read { sge } => unsafe {
                    h.setup_read(rkey, raddr)
                        .setup_sge(sge.lkey, sge.addr, sge.len)
                },
                // SAFETY: the device writes the old value (8 bytes) into the sge, a scratch
                // slot of the registry's scratch region (alive as long as the transport),
                // owned by this atomic until its result is read; on a timeout the slot stays
                // taken, so no later request reuses it while the device may still write.
                WrOp::FetchAdd { sge, add } => unsafe {
                    h.setup_atomic_fetch_add(rkey, raddr, add)
                        .setup_sge(sge.lkey, sge.addr, sge.len)
                },
                // SAFETY: as for `FetchAdd`: an 8-byte scratch slot owned by this atomic
                // until its result is read.
                WrOp::CompareSwap { sge, expected, new } => unsafe {
                    h.setup_atomic_compare_swap(rkey, raddr, expected, new)
                        .setup_sge(sge.lkey, sge.addr, sge.len)
                },
                // IBV_WR_SEND: no remote address, the peer's next posted receive takes it.
                // SAFETY: the sge is the peer's passive send buffer, registered and owned by
                // the transport (alive as long as the queue pair), checked against its size.
                WrOp::Send { sge } => unsafe {
                    h.setup_send().setup_sge(sge.lkey, sge.addr, sge.len)
                },
            }
        }
        guard.post().map_err(|e| dev_err("ibv_wr_complete", e))
    }

    fn post_recv(&mut self, wrs: &[RecvRequest]) -> Result<()> {
        let mut guard = self.qp.start_post_recv();
        for wr in wrs {
            let h = guard.construct_wr(wr.wr_id);
            // SAFETY: the buffer is registered (local write) memory of the passive receive
            // area, which lives as long as the transport; it is not read again before its
            // receive completion is polled, and reposted only after its message was copied
            // out.
            unsafe { h.setup_sge(wr.sge.lkey, wr.sge.addr, wr.sge.len) };
        }
        guard.post().map_err(|e| dev_err("ibv_post_recv", e))
    }
}

impl Device for IbvDevice {
    fn describe(&self) -> String {
        format!(
            "{} port {} ({}, {}, MTU {})",
            self.name,
            self.port.port,
            if self.port.roce { "RoCE" } else { "InfiniBand" },
            if self.port.roce {
                format!("GID index {}", self.port.gid_index)
            } else {
                format!("LID {}", self.port.lid)
            },
            self.port.mtu
        )
    }

    fn port(&self) -> PortAddr {
        self.port
    }

    fn max_qp_wr(&self) -> u32 {
        self.max_qp_wr
    }

    fn register(&self, region: &Region) -> Result<Arc<dyn MemoryRegion>> {
        let access = AccessFlags::LocalWrite
            | AccessFlags::RemoteWrite
            | AccessFlags::RemoteRead
            | AccessFlags::RemoteAtomic;
        // SAFETY: `region` is a segment's mapping or bound user memory; the registry keeps
        // the segment alive as long as this registration exists.
        let mr = unsafe { self.pd.reg_mr(region.addr as usize, region.len, access) }
            .map_err(|e| dev_err(&format!("registering {} bytes", region.len), e))?;
        Ok(Arc::new(IbvRegion {
            mr,
            base: region.addr as u64,
        }))
    }

    fn create_cq(&self, depth: u32) -> Result<Arc<dyn CompletionQueue>> {
        let cq = self
            .ctx
            .create_cq_builder()
            .setup_cqe(depth.max(16))
            .build_ex()
            .map_err(|e| dev_err("creating a completion queue", e))?;
        Ok(Arc::new(IbvCq {
            cq,
            polling: Mutex::new(()),
        }))
    }

    fn create_qp(
        &self,
        send_cq: &Arc<dyn CompletionQueue>,
        recv_cq: &Arc<dyn CompletionQueue>,
        sq_depth: u32,
        rq_depth: u32,
    ) -> Result<Box<dyn QueuePair>> {
        let ours = |cq: &Arc<dyn CompletionQueue>| {
            cq.clone()
                .into_any()
                .downcast::<IbvCq>()
                .map(|c| GenericCompletionQueue::from(c.cq.clone()))
                .map_err(|_| Error::Device("a completion queue of another device".into()))
        };
        let qp = self
            .pd
            .create_qp_builder()
            .setup_max_send_wr(sq_depth)
            .setup_max_recv_wr(rq_depth.max(1))
            .setup_max_send_sge(1)
            .setup_max_recv_sge(1)
            .setup_max_inline_data(64)
            .setup_send_cq(ours(send_cq)?)
            .setup_recv_cq(ours(recv_cq)?)
            .setup_send_ops_flags(
                SendOperationFlags::Write
                    | SendOperationFlags::Read
                    | SendOperationFlags::AtomicFetchAndAdd
                    | SendOperationFlags::AtomicCompareAndSwap
                    | SendOperationFlags::Send,
            )
            .build_ex()
            .map_err(|e| dev_err("creating a queue pair", e))?;
        Ok(Box::new(IbvQp {
            qp,
            port: self.port,
            max_rd_atomic: self.max_rd_atomic,
        }))
    }
}
