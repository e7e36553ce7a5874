//! `FusionThreshold::from_env`. One test in its own binary, because it sets a process-wide
//! environment variable that parallel tests would race on.

use fusion::{Error, FusionThreshold, DEFAULT_FUSION_THRESHOLD_BYTES, FUSION_THRESHOLD_ENV};

#[test]
fn reads_the_launcher_variable() {
    assert_eq!(FUSION_THRESHOLD_ENV, "TNT_FUSION_THRESHOLD_KB");

    std::env::remove_var(FUSION_THRESHOLD_ENV);
    assert_eq!(
        FusionThreshold::from_env().unwrap().bytes(),
        DEFAULT_FUSION_THRESHOLD_BYTES
    );

    std::env::set_var(FUSION_THRESHOLD_ENV, "128");
    assert_eq!(FusionThreshold::from_env().unwrap().bytes(), 128 * 1024);

    std::env::set_var(FUSION_THRESHOLD_ENV, "12 KiB");
    assert!(matches!(
        FusionThreshold::from_env(),
        Err(Error::InvalidThreshold { source_name, .. }) if source_name == FUSION_THRESHOLD_ENV
    ));

    std::env::remove_var(FUSION_THRESHOLD_ENV);
}
