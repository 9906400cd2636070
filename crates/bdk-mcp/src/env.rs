//! `${NAME}` placeholders in a connection's command, args, env, url and headers, read from the
//! environment each time a client opens (never at load). A variable with no value is an error
//! naming it.

/// Replaces every `${NAME}` in `text` with `lookup(NAME)`. The first name with no value is the
/// error.
pub fn resolve(text: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            return Ok(out);
        };
        let name = &after[..end];
        if name.is_empty() {
            out.push_str("${}");
        } else {
            match lookup(name) {
                Some(value) => out.push_str(&value),
                None => return Err(name.to_owned()),
            }
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The process environment.
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "TOKEN" => Some("s3cret".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn placeholders_are_replaced() {
        assert_eq!(resolve("Bearer ${TOKEN}", &env).unwrap(), "Bearer s3cret");
        assert_eq!(resolve("${TOKEN}-${EMPTY}-x", &env).unwrap(), "s3cret--x");
        assert_eq!(resolve("plain", &env).unwrap(), "plain");
        assert_eq!(resolve("${unterminated", &env).unwrap(), "${unterminated");
    }

    #[test]
    fn a_missing_variable_is_named() {
        assert_eq!(resolve("a ${TOKEN} ${NOPE}", &env).unwrap_err(), "NOPE");
    }
}
