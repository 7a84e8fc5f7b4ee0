//! Config values people write by hand: byte sizes and durations.
//!
//! Sizes: an integer (bytes) or a string `"<number><unit>"` with unit `B`, `KiB`/`KB`,
//! `MiB`/`MB`, `GiB`/`GB`, `TiB`/`TB`, all powers of 1024 (as TiKV reads them). Durations: a
//! string `"<number><unit>"` with unit `ms`, `s`, `m` or `h` (fractions allowed: `"1.5s"`).
//! Both print back in the largest unit that represents them exactly.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct ReadableSize(pub u64);

impl ReadableSize {
    pub const fn kib(n: u64) -> ReadableSize {
        ReadableSize(n * 1024)
    }
    pub const fn mib(n: u64) -> ReadableSize {
        ReadableSize(n * 1024 * 1024)
    }
    pub const fn gib(n: u64) -> ReadableSize {
        ReadableSize(n * 1024 * 1024 * 1024)
    }
    pub fn bytes(self) -> u64 {
        self.0
    }
}

const SIZE_UNITS: [(&str, u64); 9] = [
    ("TiB", 1 << 40),
    ("TB", 1 << 40),
    ("GiB", 1 << 30),
    ("GB", 1 << 30),
    ("MiB", 1 << 20),
    ("MB", 1 << 20),
    ("KiB", 1 << 10),
    ("KB", 1 << 10),
    ("B", 1),
];

impl FromStr for ReadableSize {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim();
        if let Ok(n) = t.parse::<u64>() {
            return Ok(ReadableSize(n));
        }
        for (unit, mult) in SIZE_UNITS {
            if let Some(num) = t.strip_suffix(unit) {
                let num = num.trim();
                if let Ok(n) = num.parse::<u64>() {
                    return n
                        .checked_mul(mult)
                        .map(ReadableSize)
                        .ok_or_else(|| format!("expected a size below 16 EiB, found {s:?}"));
                }
                let v: f64 = num
                    .parse()
                    .map_err(|_| format!("expected a size like \"32MiB\", found {s:?}"))?;
                let bytes = v * mult as f64;
                if !(0.0..1.8e19).contains(&bytes) {
                    return Err(format!("expected a size between 0 and 16 EiB, found {s:?}"));
                }
                return Ok(ReadableSize(bytes as u64));
            }
        }
        Err(format!(
            "expected a size like \"32MiB\" (units B, KiB, MiB, GiB, TiB), found {s:?}"
        ))
    }
}

impl fmt::Display for ReadableSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (unit, mult) in [
            ("TiB", 1u64 << 40),
            ("GiB", 1 << 30),
            ("MiB", 1 << 20),
            ("KiB", 1 << 10),
        ] {
            if self.0 >= mult && self.0.is_multiple_of(mult) {
                return write!(f, "{}{unit}", self.0 / mult);
            }
        }
        write!(f, "{}B", self.0)
    }
}

impl Serialize for ReadableSize {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for ReadableSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = ReadableSize;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a byte count or a size string like \"32MiB\"")
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<ReadableSize, E> {
                u64::try_from(v)
                    .map(ReadableSize)
                    .map_err(|_| E::custom(format!("expected a non-negative size, found {v}")))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<ReadableSize, E> {
                Ok(ReadableSize(v))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<ReadableSize, E> {
                v.parse().map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct ReadableDuration(pub Duration);

impl ReadableDuration {
    pub const fn millis(n: u64) -> ReadableDuration {
        ReadableDuration(Duration::from_millis(n))
    }
    pub const fn secs(n: u64) -> ReadableDuration {
        ReadableDuration(Duration::from_secs(n))
    }
    pub fn duration(self) -> Duration {
        self.0
    }
}

impl FromStr for ReadableDuration {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim();
        // Longest suffix first: "ms" before "m" and "s".
        for (unit, ms) in [("ms", 1.0), ("s", 1e3), ("m", 60e3), ("h", 3600e3)] {
            if let Some(num) = t.strip_suffix(unit) {
                let Ok(v) = num.trim().parse::<f64>() else {
                    continue;
                };
                let total_ms = v * ms;
                if !(0.0..1e15).contains(&total_ms) {
                    return Err(format!("expected a non-negative duration, found {s:?}"));
                }
                return Ok(ReadableDuration(Duration::from_micros(
                    (total_ms * 1000.0).round() as u64,
                )));
            }
        }
        Err(format!(
            "expected a duration like \"100ms\", \"5s\", \"2m\" or \"1h\", found {s:?}"
        ))
    }
}

impl fmt::Display for ReadableDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let us = self.0.as_micros();
        if !us.is_multiple_of(1000) {
            return write!(f, "{}ms", us as f64 / 1000.0);
        }
        let ms = us / 1000;
        for (unit, mult) in [("h", 3_600_000u128), ("m", 60_000), ("s", 1000)] {
            if ms >= mult && ms.is_multiple_of(mult) {
                return write!(f, "{}{unit}", ms / mult);
            }
        }
        write!(f, "{ms}ms")
    }
}

impl Serialize for ReadableDuration {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for ReadableDuration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn sizes_parse_in_binary_units() {
        assert_eq!(
            "32MiB".parse::<ReadableSize>().unwrap(),
            ReadableSize::mib(32)
        );
        assert_eq!(
            "32MB".parse::<ReadableSize>().unwrap(),
            ReadableSize::mib(32)
        );
        assert_eq!(
            "1.5KiB".parse::<ReadableSize>().unwrap(),
            ReadableSize(1536)
        );
        assert_eq!("7".parse::<ReadableSize>().unwrap(), ReadableSize(7));
        assert_eq!("0B".parse::<ReadableSize>().unwrap(), ReadableSize(0));
        let err = "32 potatoes".parse::<ReadableSize>().unwrap_err();
        assert!(err.contains("32 potatoes"), "{err}");
        assert!("-1MiB".parse::<ReadableSize>().is_err());
    }

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(
            "100ms".parse::<ReadableDuration>().unwrap(),
            ReadableDuration::millis(100)
        );
        assert_eq!(
            "1.5s".parse::<ReadableDuration>().unwrap(),
            ReadableDuration::millis(1500)
        );
        assert_eq!(
            "2m".parse::<ReadableDuration>().unwrap(),
            ReadableDuration::secs(120)
        );
        assert_eq!(
            "1h".parse::<ReadableDuration>().unwrap(),
            ReadableDuration::secs(3600)
        );
        for bad in ["", "5", "5 parsecs", "-1s", "ms"] {
            assert!(bad.parse::<ReadableDuration>().is_err(), "{bad:?}");
        }
    }

    proptest! {
        #[test]
        fn sizes_print_back_to_themselves(n in any::<u64>().prop_map(|n| n >> 4)) {
            let s = ReadableSize(n);
            prop_assert_eq!(s.to_string().parse::<ReadableSize>().unwrap(), s);
        }

        #[test]
        fn durations_print_back_to_themselves(us in 0u64..10_000_000_000_000) {
            let d = ReadableDuration(Duration::from_micros(us));
            prop_assert_eq!(d.to_string().parse::<ReadableDuration>().unwrap(), d);
        }
    }
}
