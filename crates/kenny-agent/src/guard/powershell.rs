//! PowerShell (stub).
use super::Blocked;
use super::posix::Arg;

pub fn check_script(_script: &str) -> Result<(), Blocked> {
    Ok(())
}

pub fn judge_command_line(_name: &str, _args: &[Arg]) -> Result<(), Blocked> {
    Ok(())
}
