//! `pipedReleases` (a Wisp extension): the piped versions the console's upgrade dialog
//! offers (`ListReleasedVersions`) and the breaking-change notes it shows
//! (`ListDeprecatedNotes`).
//!
//! Deviation: upstream asks GitHub's releases API on every call; Wisp runs without
//! internet access (Lambda in a VPC, air-gapped `wisp serve`), so the operator lists the
//! releases in the configuration. Unset, the list is [`UPSTREAM_RELEASE`], the upstream
//! release Wisp's wire was checked against.
//!
//! ```yaml
//! pipedReleases:
//!   versions: [v0.57.1, v0.57.0]        # newest first, as GitHub lists them
//!   deprecatedNotes:
//!     - version: v0.57.0
//!       notes: "- The `foo` option is removed; use `bar`."
//! ```

use serde::{Deserialize, Serialize};

/// The upstream PipeCD release Wisp's wire (RPCs, fields) was checked against (upstream
/// `pipe-cd/pipecd` v0.57.1, commit 7e228592b), as a literal for `concat!` (`wisp
/// --version`). The one place it is named.
#[macro_export]
macro_rules! upstream_release {
    () => {
        "v0.57.1"
    };
}

/// [`upstream_release!`]: the piped version the upgrade dialog offers when the
/// configuration names none, and the console `wisp console fetch` and `wisp serve` get by
/// default.
pub const UPSTREAM_RELEASE: &str = upstream_release!();

/// `pipedReleases`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct PipedReleasesConfig {
    /// Released piped versions, newest first. Unset: `[UPSTREAM_RELEASE]`; an empty list
    /// offers none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub versions: Option<Vec<String>>,
    /// Breaking-change notes per release, shown for releases at or after a project's
    /// oldest piped.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub deprecated_notes: Vec<DeprecatedNote>,
}

/// `pipedReleases.deprecatedNotes[]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct DeprecatedNote {
    pub version: String,
    pub notes: String,
}

impl PipedReleasesConfig {
    pub(crate) fn is_default(&self) -> bool {
        *self == Self::default()
    }

    /// The versions the upgrade dialog offers.
    pub fn versions(&self) -> Vec<String> {
        match &self.versions {
            Some(v) => v.clone(),
            None => vec![UPSTREAM_RELEASE.to_owned()],
        }
    }

    pub(crate) fn problems(&self, out: &mut Vec<String>) {
        for (i, v) in self.versions.iter().flatten().enumerate() {
            if !is_release_version(v) {
                out.push(format!(
                    "pipedReleases.versions[{i}]: {v:?} is not a release version like v0.57.1"
                ));
            }
        }
        for (i, n) in self.deprecated_notes.iter().enumerate() {
            if !is_release_version(&n.version) {
                out.push(format!(
                    "pipedReleases.deprecatedNotes[{i}].version: {:?} is not a release version like v0.57.1",
                    n.version
                ));
            }
        }
    }
}

/// `v` followed by MAJOR.MINOR.PATCH of digits, optionally `-prerelease`; what the
/// upgrade dialog sends back in `UpdatePipedDesiredVersion` and what a piped can fetch.
fn is_release_version(v: &str) -> bool {
    let Some(rest) = v.strip_prefix('v') else {
        return false;
    };
    let core = rest.split_once('-').map_or(rest, |(core, _)| core);
    let parts: Vec<&str> = core.split('.').collect();
    parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}
