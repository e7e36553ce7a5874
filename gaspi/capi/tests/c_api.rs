#[test]
fn t() {
    let st = std::process::Command::new(env!("CARGO"))
        .args(["build", "-p", "gaspi-capi"])
        .status()
        .unwrap();
    assert!(st.success());
}
