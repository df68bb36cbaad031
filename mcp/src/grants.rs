//! An upstream's `sandbox` setting as the configuration states it; what it does is
//! [`crate::sandbox`]'s.

use std::fmt;
use std::path::PathBuf;

use serde::Deserialize;
use serde::de::{self, MapAccess, Visitor};

/// An upstream's `sandbox` setting: `true` (the default), `false`, or a table of grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sandbox {
    /// Confined to the defaults and these grants.
    Confined(Grants),
    /// `sandbox = false`: the upstream reaches everything the proxy's user can.
    Off,
}

impl Default for Sandbox {
    fn default() -> Self {
        Sandbox::Confined(Grants::default())
    }
}

/// What an upstream may reach beyond the defaults: paths relative to the configuration
/// file's directory, absolute, or under `~/` (the proxy's `HOME`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Grants {
    /// Read (and execute) these files, or everything beneath these directories.
    #[serde(default)]
    pub read: Vec<PathBuf>,
    /// Read, write, create and remove these files, or beneath these directories.
    #[serde(default)]
    pub write: Vec<PathBuf>,
}

impl<'de> Deserialize<'de> for Sandbox {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Setting;
        impl<'de> Visitor<'de> for Setting {
            type Value = Sandbox;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("`true`, `false` or a table `{ read = [...], write = [...] }`")
            }

            fn visit_bool<E: de::Error>(self, on: bool) -> Result<Sandbox, E> {
                Ok(if on { Sandbox::default() } else { Sandbox::Off })
            }

            fn visit_map<M: MapAccess<'de>>(self, map: M) -> Result<Sandbox, M::Error> {
                Grants::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(Sandbox::Confined)
            }
        }
        deserializer.deserialize_any(Setting)
    }
}
