//! Picks and opens the device a rank uses: the fake one when `GASPI_IB_DEVICE=fake` (only in
//! builds with the `fake-verbs` feature, which the tests enable; the shipped library has no
//! fake device), else the real one (feature `verbs`).

use std::sync::Arc;

#[cfg(not(feature = "fake-verbs"))]
use crate::error::Error;
use crate::error::Result;
#[cfg(not(feature = "fake-verbs"))]
use crate::transport::verbs::device::IB_DEVICE;
use crate::transport::verbs::device::{Device, DeviceChoice};

/// Opens the device this rank should use: `Ok(Err(why))` when there is none (the caller
/// falls back to TCP and logs it); an error only when the fake was asked for and cannot
/// work, since tests must not silently run over TCP.
pub(crate) fn open(
    choice: &DeviceChoice,
    rank: u16,
    job_id: &str,
) -> Result<std::result::Result<Arc<dyn Device>, String>> {
    if choice.is_fake() {
        return open_fake(rank, job_id).map(Ok);
    }
    open_real(choice)
}

#[cfg(feature = "fake-verbs")]
fn open_fake(rank: u16, job_id: &str) -> Result<Arc<dyn Device>> {
    Ok(Arc::new(crate::transport::verbs::fake::FakeDevice::new(
        rank, job_id,
    )?))
}

#[cfg(not(feature = "fake-verbs"))]
fn open_fake(_rank: u16, _job_id: &str) -> Result<Arc<dyn Device>> {
    Err(Error::Env(format!(
        "{IB_DEVICE}=fake selects the test device, which this build of gaspi does not \
         contain (it comes with the `fake-verbs` feature, for tests)"
    )))
}

#[cfg(feature = "verbs")]
fn open_real(choice: &DeviceChoice) -> Result<std::result::Result<Arc<dyn Device>, String>> {
    Ok(crate::transport::verbs::ibv::IbvDevice::open(choice)
        .map(|d| Arc::new(d) as Arc<dyn Device>))
}

#[cfg(not(feature = "verbs"))]
fn open_real(_choice: &DeviceChoice) -> Result<std::result::Result<Arc<dyn Device>, String>> {
    Ok(Err(
        "built without the `verbs` feature (InfiniBand support)".into(),
    ))
}
