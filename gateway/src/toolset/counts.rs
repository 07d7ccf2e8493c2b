//! Whole-number arguments given with a fraction.
//!
//! A model writes `"timeout": 1500.5` as readily as `1500`, and JSON has one number
//! type: refusing it for a count of milliseconds or lines helps nobody. So for every
//! tool, each top-level argument its schema types `integer` — a count, a size or a
//! duration — takes a finite number with a fraction rounded down (`1500.5` → `1500`,
//! `-0.5` → `-1`, then the schema's own bounds apply). Identifiers are the exception:
//! a `pid`, `port`, `uid`, `gid` or `signal` of `4242.5` is a mistake to refuse, not a
//! number to round, since a rounded one names another process or port. One rule in
//! the router for every tool, not a parser per tool.

use serde_json::{Number, Value};

/// Integer arguments that name a thing rather than count one: never rounded.
const IDENTIFIERS: [&str; 5] = ["pid", "port", "uid", "gid", "signal"];

/// The top-level arguments `schema` types as integers that are counts.
pub(crate) fn of_schema(schema: &Value) -> Vec<String> {
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return Vec::new();
    };
    props
        .iter()
        .filter(|(name, p)| is_integer(p) && !IDENTIFIERS.contains(&name.as_str()))
        .map(|(name, _)| name.clone())
        .collect()
}

/// `"type": "integer"`, or a type list holding it.
fn is_integer(p: &Value) -> bool {
    match p.get("type") {
        Some(Value::String(t)) => t == "integer",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "integer"),
        _ => false,
    }
}

/// Rounds each of `counts` in `args` down when it is a number with a fraction;
/// whether anything changed.
pub(crate) fn floor(counts: &[String], args: &mut Value) -> bool {
    let Some(obj) = args.as_object_mut() else {
        return false;
    };
    let mut changed = false;
    for name in counts {
        let Some(v) = obj.get_mut(name) else { continue };
        let Some(f) = v.as_f64().filter(|_| v.is_f64()) else {
            continue;
        };
        // Beyond ±2^63 the schema's bounds refuse the value as it was written.
        if !f.is_finite() || f.fract() == 0.0 || f.abs() >= 9.2e18 {
            continue;
        }
        let whole = f.floor() as i64;
        *v = Value::Number(Number::from(whole));
        changed = true;
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "timeout": {"type": "integer", "minimum": 1},
            "lines": {"type": ["integer", "null"]},
            "pid": {"type": "integer"},
            "ratio": {"type": "number"},
            "command": {"type": "string"}
        }})
    }

    #[test]
    fn counts_are_the_integer_arguments_that_are_not_identifiers() {
        let mut c = of_schema(&schema());
        c.sort();
        assert_eq!(c, ["lines", "timeout"]);
        assert!(of_schema(&json!({"type": "object"})).is_empty());
    }

    #[test]
    fn a_fraction_is_rounded_down_and_nothing_else_changes() {
        let counts = of_schema(&schema());
        let mut args =
            json!({"timeout": 1500.5, "lines": 2.0, "pid": 42.5, "ratio": 0.5, "command": "x"});
        assert!(floor(&counts, &mut args));
        assert_eq!(args["timeout"], json!(1500));
        // 2.0 has no fraction: left as written (the schema accepts it).
        assert_eq!(args["lines"], json!(2.0));
        assert_eq!(args["pid"], json!(42.5));
        assert_eq!(args["ratio"], json!(0.5));
        let mut neg = json!({"timeout": -0.5});
        assert!(floor(&counts, &mut neg));
        assert_eq!(neg["timeout"], json!(-1));
        for odd in [
            json!({"timeout": 1e300}),
            json!({"timeout": "5.5"}),
            json!([1.5]),
        ] {
            let mut a = odd.clone();
            assert!(!floor(&counts, &mut a));
            assert_eq!(a, odd);
        }
    }
}
