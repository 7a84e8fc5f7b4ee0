//! Zone labels, and how two processes' zones relate.
//!
//! Every process may carry a `zone` label (`labels = { zone = "a" }` in its config; a worker
//! endpoint's `zone`; the zone a server reports with its regions, a worker with its status).
//! The empty string has always meant "no zone" in those places, and a process without a zone
//! is nobody's same-zone peer. So a [`Zone`] is never empty, and "no zone" is `None`: code that
//! compares zones cannot mistake two unlabelled processes for neighbours. Config files and
//! wire fields keep the plain string (`""` for none): [`Zone::label`] reads one, [`label`]
//! writes one, and [`optional`] does both for serde.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A process's zone label; never empty.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Zone(String);

impl Zone {
    /// The zone a label names: `None` for the empty label (no zone).
    pub fn label(label: impl Into<String>) -> Option<Zone> {
        let label = label.into();
        (!label.is_empty()).then_some(Zone(label))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Zone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for Zone {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Zone {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Zone, D::Error> {
        let text = String::deserialize(d)?;
        Zone::label(text)
            .ok_or_else(|| serde::de::Error::custom("expected a zone label, found an empty string"))
    }
}

/// The label text of an optional zone: `""` for none (config files, status pages, wire
/// fields).
pub fn label(zone: Option<&Zone>) -> &str {
    zone.map_or("", Zone::as_str)
}

/// Serde for an `Option<Zone>` field written as a plain string, `""` for none:
/// `#[serde(with = "types::zone::optional")]`.
pub mod optional {
    use super::*;

    pub fn serialize<S: Serializer>(zone: &Option<Zone>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(label(zone.as_ref()))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Zone>, D::Error> {
        Ok(Zone::label(String::deserialize(d)?))
    }
}

crate::label_enum! {
    /// The `zone_relation` label of two processes' zones (offload attempts, delegate bytes).
    pub enum ZoneRelation: "zone relation" {
        /// Both have a zone, the same one.
        Same = "same",
        /// Both have a zone, different ones: the bytes cross zones.
        Cross = "cross",
        /// Either has no zone.
        Unknown = "unknown",
    }
}

impl ZoneRelation {
    /// How zones `a` and `b` relate (symmetric).
    pub fn of(a: Option<&Zone>, b: Option<&Zone>) -> ZoneRelation {
        match (a, b) {
            (Some(a), Some(b)) if a == b => ZoneRelation::Same,
            (Some(_), Some(_)) => ZoneRelation::Cross,
            _ => ZoneRelation::Unknown,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn z(label: &str) -> Option<Zone> {
        Zone::label(label)
    }

    #[test]
    fn the_empty_label_is_no_zone() {
        assert_eq!(z(""), None);
        assert_eq!(z("a").unwrap().as_str(), "a");
        assert_eq!(label(z("b").as_ref()), "b");
        assert_eq!(label(None), "");
    }

    #[test]
    fn zone_relation_needs_both_zones() {
        let rel = |a: &str, b: &str| ZoneRelation::of(z(a).as_ref(), z(b).as_ref());
        assert_eq!(rel("a", "a"), ZoneRelation::Same);
        assert_eq!(rel("a", "b"), ZoneRelation::Cross);
        assert_eq!(rel("", "b"), ZoneRelation::Unknown);
        assert_eq!(rel("a", ""), ZoneRelation::Unknown);
        assert_eq!(rel("", ""), ZoneRelation::Unknown);
    }

    #[test]
    fn zone_relation_labels_are_the_metric_values() {
        let labels: Vec<&str> = ZoneRelation::ALL.iter().map(|r| r.as_str()).collect();
        assert_eq!(labels, ["same", "cross", "unknown"]);
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Endpoint {
        #[serde(default, with = "optional")]
        zone: Option<Zone>,
    }

    #[test]
    fn an_optional_zone_is_a_plain_string_in_config_files() {
        let none: Endpoint = toml::from_str("zone = \"\"").unwrap();
        assert_eq!(none, Endpoint { zone: None });
        let absent: Endpoint = toml::from_str("").unwrap();
        assert_eq!(absent, Endpoint { zone: None });
        let a: Endpoint = toml::from_str("zone = \"a\"").unwrap();
        assert_eq!(a.zone, z("a"));
        assert_eq!(toml::to_string(&a).unwrap(), "zone = \"a\"\n");
        assert_eq!(toml::to_string(&none).unwrap(), "zone = \"\"\n");
    }

    #[test]
    fn a_required_zone_rejects_the_empty_label() {
        #[derive(Debug, Deserialize)]
        struct Required {
            #[allow(dead_code)]
            zone: Zone,
        }
        let e = toml::from_str::<Required>("zone = \"\"").unwrap_err();
        assert!(e.to_string().contains("empty"), "{e}");
    }
}
