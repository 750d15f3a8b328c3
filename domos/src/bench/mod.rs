//! The benchmark suites behind `domos bench SUITE`.

pub const PIPE_ECHO: &str = "__pipe-echo";

pub fn run(_args: &[String]) -> Result<(), String> {
    Err("no suites yet".into())
}

pub fn pipe_echo() -> Result<(), String> {
    Ok(())
}
