//! Validation of tool arguments.
//!
//! The gateway validates arguments against each tool's schema, but a node never trusts
//! that: every tool reads its arguments through [`Args`], which checks the shape and
//! turns every problem into a message the model can act on (which argument, what was
//! expected, what came).

use serde_json::{Map, Value};

/// The arguments of one call, checked to be an object with only known keys.
pub struct Args<'a> {
    map: &'a Map<String, Value>,
}

impl<'a> Args<'a> {
    /// Checks that `value` is an object whose keys are all in `allowed`.
    pub fn new(value: &'a Value, allowed: &[&str]) -> Result<Self, String> {
        let map = value
            .as_object()
            .ok_or_else(|| format!("arguments must be a JSON object, got {}", kind(value)))?;
        if let Some(unknown) = map.keys().find(|k| !allowed.contains(&k.as_str())) {
            return Err(format!(
                "unknown argument {unknown:?}; expected {}",
                allowed.join(", ")
            ));
        }
        Ok(Args { map })
    }

    /// A value given as `null` counts as absent.
    fn get(&self, name: &str) -> Option<&'a Value> {
        self.map.get(name).filter(|v| !v.is_null())
    }

    /// An optional value of any shape, for the caller to check (`null`: absent).
    pub fn value(&self, name: &str) -> Option<&'a Value> {
        self.get(name)
    }

    /// An optional string.
    pub fn str(&self, name: &str) -> Result<Option<&'a str>, String> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(format!("{name:?} must be a string, got {}", kind(other))),
        }
    }

    /// A required, non-empty string.
    pub fn required_str(&self, name: &str) -> Result<&'a str, String> {
        match self.str(name)? {
            None => Err(format!("missing required argument {name:?}")),
            Some("") => Err(format!("{name:?} must not be empty")),
            Some(s) => Ok(s),
        }
    }

    /// An optional integer in `min..=max`. Whole floats (`10.0`) are accepted.
    pub fn u64_in(&self, name: &str, min: u64, max: u64) -> Result<Option<u64>, String> {
        let Some(value) = self.get(name) else {
            return Ok(None);
        };
        let n = match value {
            Value::Number(n) => n.as_u64().or_else(|| {
                n.as_f64()
                    .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f <= 9_007_199_254_740_992.0)
                    .map(|f| f as u64)
            }),
            _ => None,
        };
        match n {
            Some(n) if (min..=max).contains(&n) => Ok(Some(n)),
            _ if max == u64::MAX => Err(format!(
                "{name:?} must be an integer of at least {min}, got {}",
                short(value)
            )),
            _ => Err(format!(
                "{name:?} must be an integer from {min} to {max}, got {}",
                short(value)
            )),
        }
    }

    /// An optional boolean.
    pub fn bool(&self, name: &str) -> Result<Option<bool>, String> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => Err(format!(
                "{name:?} must be true or false, got {}",
                kind(other)
            )),
        }
    }
}

/// The JSON type of `value`, for messages.
fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// `value` as JSON, cut short for messages.
fn short(value: &Value) -> String {
    let text = value.to_string();
    if text.len() <= 40 {
        return text;
    }
    let cut: String = text.chars().take(40).collect();
    format!("{cut}…")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn shape_and_unknown_keys() {
        assert!(Args::new(&json!([1]), &["a"])
            .err()
            .unwrap()
            .contains("must be a JSON object, got an array"));
        let err = Args::new(&json!({"a": 1, "zz": 2}), &["a", "b"])
            .err()
            .unwrap();
        assert!(err.contains("\"zz\"") && err.contains("a, b"), "{err}");
        assert!(Args::new(&json!({}), &[]).is_ok());
    }

    #[test]
    fn strings() {
        let v = json!({"p": "x", "e": "", "n": 3, "z": null});
        let a = Args::new(&v, &["p", "e", "n", "z", "m"]).unwrap();
        assert_eq!(a.required_str("p"), Ok("x"));
        assert!(a
            .required_str("e")
            .unwrap_err()
            .contains("must not be empty"));
        assert!(a
            .required_str("n")
            .unwrap_err()
            .contains("must be a string, got a number"));
        assert!(a
            .required_str("m")
            .unwrap_err()
            .contains("missing required argument \"m\""));
        assert!(a.required_str("z").unwrap_err().contains("missing"));
        assert_eq!(a.str("m"), Ok(None));
    }

    #[test]
    fn integers() {
        let v = json!({"a": 5, "b": 5.0, "c": 5.5, "d": -1, "e": "5", "f": 1e300});
        let a = Args::new(&v, &["a", "b", "c", "d", "e", "f", "g"]).unwrap();
        assert_eq!(a.u64_in("a", 0, 10), Ok(Some(5)));
        assert_eq!(a.u64_in("b", 0, 10), Ok(Some(5)));
        assert_eq!(a.u64_in("g", 0, 10), Ok(None));
        assert!(a
            .u64_in("a", 6, 10)
            .unwrap_err()
            .contains("from 6 to 10, got 5"));
        for bad in ["c", "d", "e", "f"] {
            assert!(a.u64_in(bad, 0, u64::MAX).is_err(), "{bad}");
        }
        assert!(a
            .u64_in("d", 0, u64::MAX)
            .unwrap_err()
            .contains("at least 0, got -1"));
    }

    #[test]
    fn booleans() {
        let v = json!({"t": true, "s": "true"});
        let a = Args::new(&v, &["t", "s", "u"]).unwrap();
        assert_eq!(a.bool("t"), Ok(Some(true)));
        assert_eq!(a.bool("u"), Ok(None));
        assert!(a.bool("s").is_err());
    }
}
