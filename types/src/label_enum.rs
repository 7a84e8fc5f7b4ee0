//! Closed sets of label values as enums: [`label_enum!`](crate::label_enum) declares one.
//!
//! A value that is a metric label, a wire string and a word in the README (where a request
//! ran, why it was offloaded, how a request ended) is written once, as the variant's label, and
//! read everywhere else through the enum: `as_str` for the metric and the wire, `parse` (a
//! typed [`UnknownLabel`] for text that is none of the set) where it comes back in, and `ALL`
//! to create every series of a metric at start. Adding a variant adds it to all three; a
//! misspelt label no longer compiles.

/// Text that names no value of a closed set (e.g. a location a newer server sent).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown label value: kind={kind} value={value:?}")]
pub struct UnknownLabel {
    /// What the text should have named (`location`, `offload reason`, ...).
    pub kind: &'static str,
    pub value: String,
}

/// Declares a fieldless enum whose variants each carry one label, with `ALL` (every variant,
/// in declaration order), `as_str`, `Display` (the label) and `FromStr` (the label back, else
/// [`UnknownLabel`] with the given kind).
///
/// ```
/// types::label_enum! {
///     /// How a probe ended.
///     pub enum Probe: "probe" {
///         /// It answered.
///         Ok = "ok",
///         TimedOut = "timed_out",
///     }
/// }
/// assert_eq!(Probe::TimedOut.as_str(), "timed_out");
/// assert_eq!("ok".parse::<Probe>(), Ok(Probe::Ok));
/// assert_eq!(Probe::ALL, [Probe::Ok, Probe::TimedOut]);
/// assert!("busy".parse::<Probe>().is_err());
/// ```
#[macro_export]
macro_rules! label_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident : $kind:literal {
            $( $(#[$vmeta:meta])* $variant:ident = $label:literal ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        $vis enum $name {
            $( $(#[$vmeta])* $variant, )+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The label: the metric label value, the wire string, the word in the docs.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $( $name::$variant => $label, )+
                }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::std::str::FromStr for $name {
            type Err = $crate::UnknownLabel;

            fn from_str(s: &str) -> ::std::result::Result<Self, Self::Err> {
                match s {
                    $( $label => Ok($name::$variant), )+
                    _ => Err($crate::UnknownLabel {
                        kind: $kind,
                        value: s.to_string(),
                    }),
                }
            }
        }
    };
}

#[cfg(test)]
mod tests {
    crate::label_enum! {
        enum Fruit: "fruit" {
            Apple = "apple",
            /// Documented variants are fine.
            BloodOrange = "blood_orange",
        }
    }

    #[test]
    fn every_value_round_trips_through_its_label() {
        for f in Fruit::ALL {
            assert_eq!(f.as_str().parse::<Fruit>(), Ok(*f));
            assert_eq!(f.to_string(), f.as_str());
        }
        assert_eq!(Fruit::BloodOrange.as_str(), "blood_orange");
    }

    #[test]
    fn unknown_text_is_a_typed_error_naming_the_set() {
        let e = "Apple".parse::<Fruit>().unwrap_err();
        assert_eq!(
            e,
            crate::UnknownLabel {
                kind: "fruit",
                value: "Apple".into()
            }
        );
        assert_eq!(
            e.to_string(),
            "unknown label value: kind=fruit value=\"Apple\""
        );
    }
}
