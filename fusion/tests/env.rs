//! `FusionThreshold::from_env`. One test in its own binary, because it sets a process-wide
//! environment variable that parallel tests would race on.

use fusion::{Error, FusionThreshold};
use tnt_env::FUSION_THRESHOLD_KB;

#[test]
fn reads_the_launcher_variable() {
    assert_eq!(FUSION_THRESHOLD_KB, "TNT_FUSION_THRESHOLD_KB");

    std::env::remove_var(FUSION_THRESHOLD_KB);
    assert_eq!(
        FusionThreshold::from_env().unwrap(),
        FusionThreshold::DEFAULT
    );
    assert_eq!(FusionThreshold::DEFAULT.bytes(), 32 * 1024);

    std::env::set_var(FUSION_THRESHOLD_KB, "128");
    assert_eq!(FusionThreshold::from_env().unwrap().bytes(), 128 * 1024);

    std::env::set_var(FUSION_THRESHOLD_KB, "12 KiB");
    assert!(matches!(
        FusionThreshold::from_env(),
        Err(Error::InvalidFusionThreshold { source_name, .. }) if source_name == FUSION_THRESHOLD_KB
    ));

    std::env::remove_var(FUSION_THRESHOLD_KB);
}
