//! `bdk init` embeds the example projects; rebuild when they change.

fn main() {
    println!("cargo:rerun-if-changed=../../examples");
}
