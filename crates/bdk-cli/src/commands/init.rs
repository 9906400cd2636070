//! `bdk init DIR [--template NAME]`: writes a template project (one of `examples/`), then
//! validates it so a newcomer never starts from a broken scaffold.

use std::fs;
use std::path::Path;

use anyhow::{Context, bail};

use crate::cli::InitArgs;
use crate::exit::Exit;
use crate::templates;

pub fn run(args: &InitArgs) -> anyhow::Result<Exit> {
    if args.list {
        for t in templates::all() {
            crate::report::emit(&format!("{:<14} {}\n", t.name, t.description));
        }
        return Ok(Exit::Ok);
    }
    let Some(dir) = &args.dir else { bail!("give the folder to create") };
    let Some(template) = templates::find(&args.template) else {
        let names: Vec<_> = templates::all().iter().map(|t| t.name).collect();
        bail!("unknown template `{}`; available: {}", args.template, names.join(", "));
    };
    ensure_empty(dir)?;
    let written =
        templates::write(&template, dir, args.name.as_deref()).with_context(|| format!("writing {}", dir.display()))?;
    let discovery = bdk_project::discover(&[dir.to_path_buf()]);
    crate::report::emit(&format!("created {} from template `{}` ({} files)\n", dir.display(), template.name, written));
    if discovery.has_errors() {
        // A template that fails validation is a bug in bdk, not in the user's input.
        for d in discovery.all_diagnostics() {
            eprintln!("{}", crate::report::one_line(d));
        }
        bail!("the scaffold does not validate; please report this");
    }
    crate::report::emit(&format!("\nnext:\n  bdk validate --dir {0}\n  bdk info --dir {0}\n", dir.display()));
    Ok(Exit::Ok)
}

fn ensure_empty(dir: &Path) -> anyhow::Result<()> {
    match fs::read_dir(dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                bail!("{} exists and is not empty; choose a new folder", dir.display());
            }
            Ok(())
        }
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(err) => Err(err).with_context(|| format!("cannot use {}", dir.display())),
    }
}
