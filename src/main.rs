fn main() -> std::process::ExitCode {
    koord::run::main()
}
