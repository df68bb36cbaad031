use super::*;

/// A configuration in `dir` with one stdio upstream `box` whose table ends with `extra`.
fn config_in(dir: &Path, extra: &str) -> (PathBuf, ProxyConfig) {
    let text = format!(
        "audit_log = \"audit\"\nstore = \"sqlite:review.db\"\n\n[[upstream]]\nname = \"box\"\ncommand = [\"/bin/cat\"]\n{extra}\n"
    );
    let path = dir.join("tooltrust-mcp.toml");
    std::fs::write(&path, &text).expect("written");
    std::fs::create_dir_all(dir.join("audit")).expect("the audit log's directory");
    (path, ProxyConfig::parse(&text).expect("a good config"))
}

fn plan_of(dir: &Path, extra: &str) -> Result<Plan, SandboxError> {
    let (path, config) = config_in(dir, extra);
    let jail = Jail::of(&path, &config, Some(&dir.join("home")));
    let Sandbox::Confined(grants) = setting(&config.upstream[0]) else {
        panic!("confined")
    };
    jail.plan(&grants, &config.upstream[0], "/bin/cat")
}

#[test]
fn settings_are_read_as_written() {
    let parse = |extra: &str| {
        let text =
            format!("audit_log = \"a\"\n[[upstream]]\nname = \"x\"\ncommand = [\"y\"]\n{extra}");
        ProxyConfig::parse(&text).map(|config| setting(&config.upstream[0]))
    };
    assert_eq!(parse(""), Ok(Sandbox::default()));
    assert_eq!(parse("sandbox = true"), Ok(Sandbox::default()));
    assert_eq!(parse("sandbox = false"), Ok(Sandbox::Off));
    assert_eq!(
        parse("sandbox = { read = [\"data\"], write = [\"~/.cache/x\", \"/var/tmp/x\"] }"),
        Ok(Sandbox::Confined(Grants {
            read: vec!["data".into()],
            write: vec!["~/.cache/x".into(), "/var/tmp/x".into()],
        }))
    );
    for (bad, needle) in [
        ("sandbox = { reed = [\"data\"] }", "reed"),
        ("sandbox = \"off\"", "`true`, `false` or a table"),
        ("sandbox = { read = \"data\" }", "read"),
    ] {
        let error = parse(bad).expect_err(bad);
        assert_eq!(error.line, Some(5), "{error}");
        assert!(error.to_string().contains(needle), "{needle}: {error}");
    }
    // Only a process has a sandbox.
    let error = ProxyConfig::parse(
        "audit_log = \"a\"\n[[upstream]]\nname = \"x\"\nurl = \"http://127.0.0.1:1/mcp\"\nsandbox = false\n",
    )
    .expect_err("a sandbox for a URL");
    assert_eq!(error.line, Some(5), "{error}");
    assert!(error.to_string().contains("`sandbox`"), "{error}");
}

#[test]
fn no_grant_may_reach_the_proxys_files() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let root = dir.path();
    std::fs::create_dir(root.join("data")).expect("a directory");
    let fine = plan_of(root, "sandbox = { read = [\"data\"] }").expect("a grant beside");
    assert!(
        fine.rules
            .contains(&(resolve(&root.join("data")), Access::Read)),
        "{:?}",
        fine.rules
    );
    std::fs::write(root.join("audit").join("audit.jsonl"), "").expect("a log");
    for (grant, what) in [
        ("read = [\".\"]", "configuration"),
        ("write = [\"audit\"]", "audit log"),
        ("read = [\"audit/audit.jsonl\"]", "audit log"),
        ("read = [\"tooltrust-mcp.toml\"]", "configuration"),
    ] {
        let refused = plan_of(root, &format!("sandbox = {{ {grant} }}"));
        match refused {
            Err(SandboxError::Exposes { what: said, .. }) => assert_eq!(said, what, "{grant}"),
            other => panic!("{grant}: {other:?}"),
        }
    }
    // SQLite's journal beside the store is the store's too.
    std::fs::write(root.join("review.db-wal"), "").expect("a journal");
    let refused = plan_of(root, "sandbox = { read = [\"review.db-wal\"] }");
    assert!(
        matches!(
            refused,
            Err(SandboxError::Exposes {
                what: "review store",
                ..
            })
        ),
        "{refused:?}"
    );
    let missing = plan_of(root, "sandbox = { read = [\"absent\"] }");
    assert!(
        matches!(&missing, Err(SandboxError::Grant { path, .. }) if path.ends_with("absent")),
        "{missing:?}"
    );
}

#[test]
fn a_grant_under_the_tilde_is_in_home() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let root = dir.path();
    std::fs::create_dir_all(root.join("home").join(".cache")).expect("a home");
    let plan = plan_of(root, "sandbox = { write = [\"~/.cache\"] }").expect("granted");
    assert!(
        plan.rules
            .contains(&(resolve(&root.join("home").join(".cache")), Access::Write)),
        "{:?}",
        plan.rules
    );
    let (path, config) = config_in(root, "sandbox = { write = [\"~/.cache\"] }");
    let homeless = Jail::of(&path, &config, None);
    let Sandbox::Confined(grants) = setting(&config.upstream[0]) else {
        panic!("confined")
    };
    assert!(matches!(
        homeless.plan(&grants, &config.upstream[0], "/bin/cat"),
        Err(SandboxError::NoHome { .. })
    ));
}

#[test]
fn defaults_that_reach_the_proxys_files_or_home_are_left_out() {
    // Beneath /tmp, like a desktop's temporary directory: /tmp holds the configuration.
    let dir = tempfile::Builder::new()
        .tempdir_in("/tmp")
        .expect("a temp dir in /tmp");
    let plan = plan_of(dir.path(), "").expect("the defaults");
    let tmp = resolve(Path::new("/tmp"));
    assert!(
        plan.rules.iter().all(|(path, _)| *path != tmp),
        "{:?}",
        plan.rules
    );
    assert!(
        plan.left_out
            .iter()
            .any(|why| why.starts_with(&format!("{},", tmp.display()))
                && why.contains("configuration")),
        "{:?}",
        plan.left_out
    );
    assert!(
        plan.rules
            .contains(&(resolve(Path::new("/usr")), Access::Read))
    );
    assert!(
        plan.rules
            .contains(&(resolve(Path::new("/dev/null")), Access::Write))
    );

    // A home beneath a default leaves that default out too.
    let (path, config) = config_in(dir.path(), "");
    let jail = Jail::of(&path, &config, Some(Path::new("/opt/home/ann")));
    let plan = jail
        .plan(&Grants::default(), &config.upstream[0], "/bin/cat")
        .expect("the defaults");
    if Path::new("/opt").exists() {
        assert!(
            plan.left_out
                .iter()
                .any(|why| why.contains("home directory")),
            "{:?}",
            plan.left_out
        );
    }
}

#[test]
fn weakened_sandboxes_are_said_and_recorded() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let (path, config) = config_in(dir.path(), "sandbox = false");
    let notes = Jail::new(&path, &config).notes(&config.upstream);
    let off: Vec<&Note> = notes
        .iter()
        .filter(|note| note.weakened.is_some())
        .collect();
    assert_eq!(off.len(), 1, "{notes:?}");
    assert!(off[0].text.contains("runs unsandboxed (`sandbox = false`)"));
    let event = off[0].event().expect("an audit event");
    assert_eq!(event["event"], "mcp_upstream_sandbox");
    assert_eq!(event["upstream"], "box");
    assert_eq!(event["sandbox"], "off");

    let (path, config) = config_in(dir.path(), "");
    let notes = Jail::new(&path, &config).notes(&config.upstream);
    let weakened: Vec<&str> = notes.iter().filter_map(|note| note.weakened).collect();
    match support() {
        Support::Full => assert!(weakened.is_empty(), "{notes:?}"),
        Support::Partial(_) => assert_eq!(weakened, ["partial"]),
        Support::None(_) => assert_eq!(weakened, ["unavailable"]),
    }
}

/// A real process in the sandbox: it reads what is granted and nothing of the proxy's,
/// and the spawn fails rather than run it unconfined.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_confined_process_reads_only_what_is_granted() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let root = dir.path();
    std::fs::create_dir(root.join("data")).expect("a directory");
    std::fs::write(root.join("data").join("granted.txt"), "granted").expect("a file");
    std::fs::write(root.join("elsewhere.txt"), "elsewhere").expect("a file");
    let (path, config) = config_in(root, "sandbox = { read = [\"data\"] }");
    let jail = Jail::new(&path, &config);
    if let Support::None(_) = jail.support {
        return; // `weakened_sandboxes_are_said_and_recorded` checks what is said instead.
    }
    let cat = |file: PathBuf| {
        let mut command = tokio::process::Command::new("/bin/cat");
        command.arg(file);
        jail.confine(&mut command, &config.upstream[0], "/bin/cat")
            .expect("confined");
        command.output()
    };
    let granted = cat(root.join("data").join("granted.txt"))
        .await
        .expect("cat runs");
    assert_eq!(granted.stdout, b"granted", "{granted:?}");
    for file in [
        path.clone(),
        root.join("elsewhere.txt"),
        PathBuf::from("/proc/self/environ"),
    ] {
        let denied = cat(file.clone()).await.expect("cat runs");
        assert!(!denied.status.success(), "{}: {denied:?}", file.display());
        assert!(
            String::from_utf8_lossy(&denied.stderr).contains("Permission denied"),
            "{}: {denied:?}",
            file.display()
        );
    }
}
