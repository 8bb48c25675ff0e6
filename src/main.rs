fn main() -> std::process::ExitCode {
    // The container shim of the embedded node runtime: nothing else starts in it.
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args
        .get(1)
        .is_some_and(|a| a == koord::noderuntime::shim::ARG)
    {
        let code = koord::noderuntime::shim::main(&args[2..]);
        return std::process::ExitCode::from(code.clamp(0, 255) as u8);
    }
    koord::run::main()
}
