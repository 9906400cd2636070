//! Opening the playground in the user's browser: `bdk serve --dev` on a terminal offers it
//! (type `o` and Enter). Uses the platform's opener (`xdg-open`, `open`, `start`); nothing is
//! opened without the user asking, and nothing is offered when stdin or stdout is not a TTY.

use std::io::{BufRead as _, IsTerminal as _};
use std::process::{Command, Stdio};

/// Whether an offer can be answered here: both stdin and stdout are terminals.
pub fn interactive() -> bool {
    std::io::stdin().is_terminal() && std::io::stdout().is_terminal()
}

/// Prints the offer and, on a thread of its own, opens `url` each time the user types `o`.
pub fn offer(url: String) {
    eprintln!("note: type o and Enter to open the playground in your browser");
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines().map_while(Result::ok) {
            if line.trim().eq_ignore_ascii_case("o")
                && let Err(error) = open(&url)
            {
                eprintln!("note: cannot open a browser ({error}); open {url} yourself");
            }
        }
    });
}

/// Opens `url` with the platform's opener.
pub fn open(url: &str) -> std::io::Result<()> {
    let mut command = if cfg!(target_os = "macos") {
        Command::new("open")
    } else if cfg!(windows) {
        let mut c = Command::new("cmd");
        c.args(["/C", "start", ""]);
        c
    } else {
        Command::new("xdg-open")
    };
    command.arg(url).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).spawn().map(drop)
}
