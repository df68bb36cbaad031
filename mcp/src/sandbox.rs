//! The sandbox a stdio upstream runs in. An upstream process runs as the proxy's user, so
//! without one it could read whatever that user can: the proxy's configuration (found
//! through `/proc/<proxy>/cmdline`), its lock file, review store, audit log and keys, and
//! the user's home directory.
//!
//! - The proxy makes itself non-dumpable at start ([`harden`]): its `/proc` entries
//!   (`environ`, `mem`, …) are then unreadable to other processes of the same user.
//! - On Linux, each stdio upstream starts in a Landlock domain (built before the fork,
//!   entered between fork and exec), reaching only the defaults below and what its
//!   `sandbox = { read = [...], write = [...] }` grants; it cannot signal the proxy or read
//!   other processes' memory or environment either. A grant may not hold, or lie in, one of
//!   the proxy's own files (Landlock can only allow, never carve an exception out of an
//!   allowed directory).
//!
//!   The defaults: read and execute `/usr`, `/lib`, `/lib32`, `/lib64`, `/bin`, `/sbin`,
//!   `/etc`, `/opt`, `/nix/store` and the directory of the upstream's program; read
//!   `/dev/zero`, `/dev/random`, `/dev/urandom`; read and write `/dev/null` and everything
//!   beneath `/tmp`. A default that holds (or lies within) one of the proxy's files or the
//!   user's home directory is left out, and the proxy says so. Nothing else: no home
//!   directory, no `/proc` (so no `/proc/<proxy>/cmdline` either), no `/sys`, no `/run`.
//!   Network access is not restricted.
//! - `sandbox = false`, a kernel without Landlock (or with an older Landlock than the proxy
//!   asks for), or another platform: the upstream runs with less or no confinement, and
//!   the proxy says so at start, on standard error and in the audit log.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::config::{ProxyConfig, Upstream};
pub use crate::grants::{Grants, Sandbox};

/// Why an upstream could not be sandboxed as configured (it is then not started).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    /// A granted path could not be opened (it must exist when the upstream starts).
    #[error("the sandbox cannot grant {path}: {source}")]
    Grant {
        /// The path, as resolved.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A grant under `~/` while the proxy has no `HOME`.
    #[error("the sandbox cannot grant {path}: HOME is not set")]
    NoHome {
        /// The path, as written.
        path: PathBuf,
    },
    /// A grant would reach one of the proxy's own files.
    #[error(
        "the sandbox grant {grant} would reach the proxy's {what} {file}: grant a path that neither holds it nor lies within it"
    )]
    Exposes {
        /// The granted path, resolved.
        grant: PathBuf,
        /// What the proxy's file is (its configuration, audit log, …).
        what: &'static str,
        /// The file, resolved.
        file: PathBuf,
    },
    /// The kernel refused the sandbox's rules.
    #[error("the sandbox could not be built")]
    Landlock(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// Makes the proxy non-dumpable: its `/proc/<pid>` entries (`environ`, `mem`, `maps`, …)
/// become unreadable to other processes of the same user (a process with `CAP_SYS_PTRACE`
/// still reads them), and it leaves no core dump. Its children are dumpable again after
/// `exec`. Nothing to do off Linux.
pub fn harden() -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)?;
    Ok(())
}

/// One thing the proxy says at start about an upstream's sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Note {
    /// The upstream.
    pub upstream: String,
    /// `off`, `unavailable` or `partial` when the upstream runs less confined than the
    /// defaults promise (recorded in the audit log); `None` for a narrowed default.
    pub weakened: Option<&'static str>,
    /// What to tell the person running the proxy.
    pub text: String,
}

impl Note {
    /// The audit event of a weakened sandbox.
    pub fn event(&self) -> Option<Value> {
        self.weakened.map(|sandbox| {
            json!({
                "event": "mcp_upstream_sandbox",
                "upstream": self.upstream,
                "sandbox": sandbox,
                "reason": self.text,
            })
        })
    }
}

/// How far this system confines an upstream.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Support {
    /// Every restriction the proxy asks for.
    Full,
    /// Landlock, but not all of it: the reason.
    Partial(String),
    /// No Landlock: the reason.
    None(String),
}

/// The sandbox of one proxy's upstreams: the proxy's own files, which no upstream may
/// reach, and what this system can enforce.
pub(crate) struct Jail {
    /// Relative grants are relative to this: the configuration's directory.
    dir: PathBuf,
    /// The proxy's own files, resolved, and what each is.
    protected: Vec<(PathBuf, &'static str)>,
    home: Option<PathBuf>,
    support: Support,
}

/// Read and execute.
const SYSTEM: [&str; 9] = [
    "/usr",
    "/lib",
    "/lib32",
    "/lib64",
    "/bin",
    "/sbin",
    "/etc",
    "/opt",
    "/nix/store",
];
const READABLE_DEVICES: [&str; 3] = ["/dev/zero", "/dev/random", "/dev/urandom"];
const WRITABLE: [&str; 2] = ["/dev/null", "/tmp"];

/// What a rule allows beneath its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(
    not(target_os = "linux"),
    allow(dead_code, reason = "only Linux has Landlock")
)]
enum Access {
    /// Read and execute.
    Read,
    /// Everything (read, write, create, remove).
    Write,
}

/// The rules of one upstream's sandbox, and the defaults left out of it (and why).
#[derive(Debug, Default)]
#[cfg_attr(
    not(target_os = "linux"),
    allow(dead_code, reason = "only Linux has Landlock")
)]
struct Plan {
    rules: Vec<(PathBuf, Access)>,
    left_out: Vec<String>,
}

/// The path as the kernel will see it: symbolic links resolved, and for a path that does
/// not exist yet, its longest existing ancestor resolved.
fn resolve(path: &Path) -> PathBuf {
    if let Ok(real) = path.canonicalize() {
        return real;
    }
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) if !parent.as_os_str().is_empty() => resolve(parent).join(name),
        _ => std::path::absolute(path).unwrap_or_else(|_| path.to_owned()),
    }
}

/// Whether granting `grant` reaches `file`: it holds it, or lies within it.
fn reaches(grant: &Path, file: &Path) -> bool {
    file.starts_with(grant) || grant.starts_with(file)
}

/// The upstream's setting (the default when the file gives none).
fn setting(upstream: &Upstream) -> Sandbox {
    upstream
        .sandbox
        .as_ref()
        .map(|sandbox| sandbox.get_ref().clone())
        .unwrap_or_default()
}

/// The directory of the file `program` starts (looked up in `path`, the upstream's `PATH`,
/// when it names no directory), its symbolic links resolved.
fn program_dir(program: &str, path: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    let program = Path::new(program);
    let found = if program.components().count() > 1 {
        program.to_owned()
    } else {
        std::env::split_paths(path?)
            .map(|dir| dir.join(program))
            .find(|candidate| executable(candidate))?
    };
    found.canonicalize().ok()?.parent().map(Path::to_owned)
}

#[cfg(unix)]
fn executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    path.metadata()
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn executable(path: &Path) -> bool {
    path.is_file()
}

impl Jail {
    /// The sandbox of the upstreams of `config`, read from `path`, for the user whose
    /// home is the proxy's `HOME`.
    pub fn new(path: &Path, config: &ProxyConfig) -> Jail {
        let home = std::env::var_os("HOME").filter(|home| !home.is_empty());
        Jail::of(path, config, home.as_deref().map(Path::new))
    }

    fn of(path: &Path, config: &ProxyConfig, home: Option<&Path>) -> Jail {
        let dir = crate::config::config_dir(path).to_owned();
        let mut protected = vec![
            (resolve(path), "configuration"),
            (resolve(&crate::pin::lock_path(path)), "lock file"),
            (resolve(&dir.join(&config.audit_log)), "audit log"),
        ];
        if let Some(store) = &config.store
            && let Ok(tooltrust_store::Location::Sqlite(file)) =
                tooltrust_store::Location::parse(store.get_ref())
        {
            let file = resolve(&dir.join(file));
            // SQLite's journals beside the database hold its rows too.
            for suffix in ["-wal", "-shm", "-journal"] {
                let mut journal = file.clone().into_os_string();
                journal.push(suffix);
                protected.push((PathBuf::from(journal), "review store"));
            }
            protected.push((file, "review store"));
        }
        if let Some(file) = &config.reviewers {
            protected.push((resolve(&dir.join(file)), "reviewers file"));
        }
        if let Some(file) = &config.audit_key {
            protected.push((resolve(&dir.join(file)), "audit key"));
        }
        Jail {
            dir,
            protected,
            home: home.map(resolve),
            support: support(),
        }
    }

    /// What to say at start about each stdio upstream's sandbox: weakened ones (recorded
    /// in the audit log too) and defaults left out.
    pub fn notes(&self, upstreams: &[Upstream]) -> Vec<Note> {
        let mut notes = Vec::new();
        for upstream in upstreams {
            let Some(crate::config::Endpoint::Command { program, .. }) = upstream.endpoint() else {
                continue;
            };
            let name = upstream.name.get_ref().clone();
            let open = "it can read everything the proxy's user can, the proxy's configuration, store, audit log and keys included";
            let (weakened, text) = match (setting(upstream), &self.support) {
                (Sandbox::Off, _) => (
                    "off",
                    format!("upstream {name:?} runs unsandboxed (`sandbox = false`): {open}"),
                ),
                (Sandbox::Confined(_), Support::None(why)) => (
                    "unavailable",
                    format!("upstream {name:?} runs unsandboxed: {why}; {open}"),
                ),
                (Sandbox::Confined(grants), support) => {
                    if let Ok(plan) = self.plan(&grants, upstream, &program) {
                        for left_out in plan.left_out {
                            notes.push(Note {
                                upstream: name.clone(),
                                weakened: None,
                                text: format!(
                                    "upstream {name:?}: the sandbox leaves out {left_out}"
                                ),
                            });
                        }
                    }
                    let Support::Partial(why) = support else {
                        continue;
                    };
                    (
                        "partial",
                        format!("upstream {name:?} is only partly sandboxed: {why}"),
                    )
                }
            };
            notes.push(Note {
                upstream: name,
                weakened: Some(weakened),
                text,
            });
        }
        notes
    }

    /// A grant as written, resolved.
    fn granted(&self, path: &Path) -> Result<PathBuf, SandboxError> {
        let full = match path.strip_prefix("~") {
            Ok(rest) => self
                .home
                .as_ref()
                .ok_or_else(|| SandboxError::NoHome {
                    path: path.to_owned(),
                })?
                .join(rest),
            Err(_) => self.dir.join(path),
        };
        full.canonicalize()
            .map_err(|source| SandboxError::Grant { path: full, source })
    }

    /// The rules of `upstream`'s sandbox, which starts `program`.
    fn plan(
        &self,
        grants: &Grants,
        upstream: &Upstream,
        program: &str,
    ) -> Result<Plan, SandboxError> {
        let mut plan = Plan::default();
        let path_var = upstream
            .env
            .get("PATH")
            .map(std::ffi::OsString::from)
            .or_else(|| std::env::var_os("PATH"));
        let own = program_dir(program, path_var.as_deref());
        let defaults = SYSTEM
            .iter()
            .chain(&READABLE_DEVICES)
            .map(|path| (PathBuf::from(path), Access::Read))
            .chain(own.map(|dir| (dir, Access::Read)))
            .chain(
                WRITABLE
                    .iter()
                    .map(|path| (PathBuf::from(path), Access::Write)),
            );
        for (path, access) in defaults {
            // A default that does not exist here is no default here.
            let Ok(path) = path.canonicalize() else {
                continue;
            };
            if let Some((file, what)) = self.reached(&path) {
                plan.left_out.push(format!(
                    "{}, which would reach the proxy's {what} {}; grant narrower paths in `sandbox = {{ read = [...], write = [...] }}`",
                    path.display(),
                    file.display()
                ));
            } else if let Some(home) = self.home.as_ref().filter(|home| home.starts_with(&path)) {
                plan.left_out.push(format!(
                    "{}, which holds the home directory {}",
                    path.display(),
                    home.display()
                ));
            } else {
                plan.rules.push((path, access));
            }
        }
        let asked = grants
            .read
            .iter()
            .map(|path| (path, Access::Read))
            .chain(grants.write.iter().map(|path| (path, Access::Write)));
        for (path, access) in asked {
            let path = self.granted(path)?;
            if let Some((file, what)) = self.reached(&path) {
                return Err(SandboxError::Exposes {
                    grant: path,
                    what,
                    file: file.to_owned(),
                });
            }
            plan.rules.push((path, access));
        }
        Ok(plan)
    }

    /// The first of the proxy's files that granting `path` would reach.
    fn reached(&self, path: &Path) -> Option<(&Path, &'static str)> {
        self.protected
            .iter()
            .find(|(file, _)| reaches(path, file))
            .map(|(file, what)| (file.as_path(), *what))
    }

    /// Sets `command` (which starts `upstream`'s `program`) to enter the upstream's
    /// sandbox between fork and exec. Does nothing for `sandbox = false`, or where the
    /// system has no Landlock ([`Jail::notes`] says so).
    pub fn confine(
        &self,
        command: &mut tokio::process::Command,
        upstream: &Upstream,
        program: &str,
    ) -> Result<(), SandboxError> {
        let Sandbox::Confined(grants) = setting(upstream) else {
            return Ok(());
        };
        if let Support::None(_) = self.support {
            return Ok(());
        }
        let plan = self.plan(&grants, upstream, program)?;
        imp::confine(command, &plan)
    }
}

/// What this system enforces, once per process.
fn support() -> Support {
    static SUPPORT: std::sync::OnceLock<Support> = std::sync::OnceLock::new();
    SUPPORT.get_or_init(imp::support).clone()
}

#[cfg(target_os = "linux")]
mod imp {
    use landlock::{
        ABI, Access as _, AccessFs, CompatLevel, Compatible as _, PathBeneath, PathFd, Ruleset,
        RulesetAttr as _, RulesetCreated, RulesetCreatedAttr as _, RulesetError, RulesetStatus,
        Scope,
    };

    use super::{Access, Plan, SandboxError, Support};

    /// The Landlock ABI whose restrictions the proxy asks for: every file-system right up
    /// to device ioctls (ABI 5), and scoped signals and abstract UNIX sockets (ABI 6).
    const TARGET: ABI = ABI::V6;

    fn handled(abi: ABI) -> Result<Ruleset, RulesetError> {
        let ruleset = Ruleset::default().handle_access(AccessFs::from_all(abi))?;
        // Scopes start with ABI 6; an empty set is refused.
        if Scope::from_all(abi).is_empty() {
            Ok(ruleset)
        } else {
            ruleset.scope(Scope::from_all(abi))
        }
    }

    /// Whether the kernel supports every restriction of `abi`.
    fn supports(abi: ABI) -> bool {
        Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(AccessFs::from_all(abi))
            .and_then(|ruleset| {
                if Scope::from_all(abi).is_empty() {
                    Ok(ruleset)
                } else {
                    ruleset.scope(Scope::from_all(abi))
                }
            })
            .and_then(Ruleset::create)
            .is_ok()
    }

    pub(super) fn support() -> Support {
        if supports(TARGET) {
            return Support::Full;
        }
        let older = [ABI::V5, ABI::V4, ABI::V3, ABI::V2, ABI::V1]
            .into_iter()
            .find(|abi| supports(*abi));
        match older {
            Some(abi) => Support::Partial(format!(
                "this kernel's Landlock is ABI {abi}, the proxy asks for ABI {TARGET} (Linux 6.12): reading and writing outside the grants is denied, but {}",
                match abi {
                    ABI::V1 =>
                        "truncating, linking or renaming across directories, device ioctls, signals to the proxy and abstract UNIX sockets are not restricted",
                    ABI::V2 =>
                        "truncating, device ioctls, signals to the proxy and abstract UNIX sockets are not restricted",
                    ABI::V3 | ABI::V4 =>
                        "device ioctls, signals to the proxy and abstract UNIX sockets are not restricted",
                    _ => "signals to the proxy and abstract UNIX sockets are not restricted",
                }
            )),
            None => Support::None(
                "this kernel has no Landlock (Linux 5.13 or later, with `landlock` among its LSMs)"
                    .to_owned(),
            ),
        }
    }

    fn built(plan: &Plan) -> Result<RulesetCreated, SandboxError> {
        let refused = |error: RulesetError| SandboxError::Landlock(Box::new(error));
        let mut ruleset = handled(TARGET).and_then(Ruleset::create).map_err(refused)?;
        for (path, access) in &plan.rules {
            let mut rights = match access {
                Access::Read => AccessFs::from_read(TARGET),
                Access::Write => AccessFs::from_all(TARGET),
            };
            if !path.is_dir() {
                rights &= AccessFs::from_file(TARGET);
            }
            let fd = PathFd::new(path).map_err(|error| SandboxError::Landlock(Box::new(error)))?;
            ruleset = ruleset
                .add_rule(PathBeneath::new(fd, rights))
                .map_err(refused)?;
        }
        Ok(ruleset)
    }

    pub(super) fn confine(
        command: &mut tokio::process::Command,
        plan: &Plan,
    ) -> Result<(), SandboxError> {
        let mut ruleset = Some(built(plan)?);
        // SAFETY: this runs in the child between fork and exec, where only
        // async-signal-safe work is sound: the ruleset was built before the fork, and
        // `restrict_self` makes two system calls (`prctl(PR_SET_NO_NEW_PRIVS)`,
        // `landlock_restrict_self`) and closes the ruleset's descriptor, allocating
        // nothing; the errors are built from the raw `errno`.
        unsafe {
            command.pre_exec(move || restrict(ruleset.take()));
        }
        Ok(())
    }

    /// Enters the sandbox, or fails the spawn (fail closed): the upstream never runs
    /// outside it.
    fn restrict(ruleset: Option<RulesetCreated>) -> std::io::Result<()> {
        let Some(ruleset) = ruleset else {
            return Err(std::io::Error::from_raw_os_error(
                rustix::io::Errno::INVAL.raw_os_error(),
            ));
        };
        match ruleset.restrict_self() {
            Ok(status) if status.ruleset != RulesetStatus::NotEnforced => Ok(()),
            Ok(_) => Err(std::io::Error::from_raw_os_error(
                rustix::io::Errno::NOSYS.raw_os_error(),
            )),
            Err(_) => Err(std::io::Error::last_os_error()),
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use super::{Plan, SandboxError, Support};

    pub(super) fn support() -> Support {
        Support::None("the proxy's sandbox is Linux's Landlock, and this is not Linux".to_owned())
    }

    pub(super) fn confine(
        _command: &mut tokio::process::Command,
        _plan: &Plan,
    ) -> Result<(), SandboxError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests;
