//! `LocalSandbox` against real directories and real processes: every way out of the root
//! (`..`, absolute paths, symlinks, hard links) refused, huge and binary files bounded, commands
//! killed whole on timeout and cancellation, their output capped and their environment scrubbed.

use std::collections::BTreeSet;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use toolwright_core::{
    CancelSignal, EntryKind, ExecRequest, GrepRequest, NeverCancelled, Sandbox, SandboxError,
};
use toolwright_runtime::LocalSandbox;

/// A temp directory holding the sandbox's root (`root/`) and files outside it, side by side so
/// that hard links between them are possible (same file system).
struct Fixture {
    _dir: tempfile::TempDir,
    outside: PathBuf,
    root: PathBuf,
    sandbox: LocalSandbox,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().expect("a temp dir");
    let outside = dir.path().join("outside");
    let root = dir.path().join("root");
    std::fs::create_dir(&outside).expect("outside dir");
    std::fs::create_dir(&root).expect("root dir");
    std::fs::write(outside.join("secret.txt"), "the secret\n").expect("secret");
    let sandbox = LocalSandbox::open(&root).expect("open the sandbox");
    let root = sandbox.root().to_owned();
    let outside = std::fs::canonicalize(outside).expect("canonical outside");
    Fixture {
        _dir: dir,
        outside,
        root,
        sandbox,
    }
}

fn is_escape<T: std::fmt::Debug>(result: &Result<T, SandboxError>) -> bool {
    matches!(result, Err(SandboxError::Escape { .. }))
}

fn grep_request(pattern: &str, path: &str) -> GrepRequest {
    GrepRequest {
        pattern: pattern.to_owned(),
        path: path.to_owned(),
        glob: None,
        case_insensitive: false,
        max_matches: 100,
    }
}

fn exec_request(command: &str, timeout: Duration, max_output: usize) -> ExecRequest {
    ExecRequest {
        command: command.to_owned(),
        timeout,
        max_output,
    }
}

/// Fires once `at` has passed.
struct CancelAt(tokio::time::Instant);

impl CancelSignal for CancelAt {
    fn is_cancelled(&self) -> bool {
        tokio::time::Instant::now() >= self.0
    }
    fn cancelled(&self) -> BoxFuture<'_, ()> {
        Box::pin(tokio::time::sleep_until(self.0))
    }
}

/// Whether the process `pid` is gone: no longer in the process table, or a zombie (dead, only
/// waiting for whichever process inherited it to reap it). Waits up to 3 s for SIGKILL to land.
fn process_gone(pid: u32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let gone = match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => true,
            // The state follows the command name, which is in parentheses.
            Ok(stat) => stat
                .rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with(['Z', 'X'])),
        };
        if gone || Instant::now() >= deadline {
            return gone;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn read_pid(file: &Path) -> u32 {
    std::fs::read_to_string(file)
        .expect("the command wrote its pid")
        .trim()
        .parse()
        .expect("a pid")
}

/// This process's peak resident memory, from `/proc/self/status`.
fn peak_rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let line = status
        .lines()
        .find(|line| line.starts_with("VmHWM:"))
        .expect("a VmHWM line");
    let kb: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|value| value.parse().ok())
        .expect("VmHWM in kB");
    kb * 1024
}

#[tokio::test]
async fn open_needs_an_existing_directory() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let missing = LocalSandbox::open(dir.path().join("missing"));
    assert!(
        matches!(missing, Err(SandboxError::NotFound { .. })),
        "{missing:?}"
    );
    let file = dir.path().join("file");
    std::fs::write(&file, "x").expect("file");
    let not_dir = LocalSandbox::open(&file);
    assert!(
        matches!(
            not_dir,
            Err(SandboxError::WrongKind {
                expected: "a directory",
                ..
            })
        ),
        "{not_dir:?}"
    );
}

const TRAVERSALS: &[&str] = &[
    "..",
    "../",
    "../x",
    "../outside/secret.txt",
    "a/../../x",
    "a/../b",
    "./../x",
    "a/b/../../..",
    "sub/..",
    "/etc/passwd",
    "/",
    "//etc/passwd",
];

#[tokio::test]
async fn traversal_is_refused_by_every_operation() {
    let f = fixture();
    std::fs::create_dir(f.root.join("sub")).expect("sub");
    for path in TRAVERSALS {
        let read = f.sandbox.read(path, 0, 100).await;
        assert!(is_escape(&read), "read `{path}`: {read:?}");
        let write = f.sandbox.write(path, b"x".to_vec()).await;
        assert!(is_escape(&write), "write `{path}`: {write:?}");
        let list = f.sandbox.list(path).await;
        assert!(is_escape(&list), "list `{path}`: {list:?}");
        let grep = f.sandbox.grep(grep_request("secret", path)).await;
        assert!(is_escape(&grep), "grep `{path}`: {grep:?}");
        let glob = f.sandbox.glob("**", path, 10).await;
        assert!(is_escape(&glob), "glob `{path}`: {glob:?}");
        let remove = f.sandbox.remove(path).await;
        assert!(is_escape(&remove), "remove `{path}`: {remove:?}");
    }
    // Nothing was written next to the root.
    let beside: BTreeSet<_> = std::fs::read_dir(f.root.parent().expect("parent"))
        .expect("read the temp dir")
        .map(|entry| entry.expect("entry").file_name())
        .collect();
    assert_eq!(beside.len(), 2, "{beside:?}");
    assert_eq!(
        std::fs::read_to_string(f.outside.join("secret.txt")).expect("secret"),
        "the secret\n"
    );
}

#[tokio::test]
async fn remove_takes_files_trees_and_links_but_never_the_root_or_what_a_link_points_to() {
    let f = fixture();
    std::fs::create_dir_all(f.root.join("tree/deeper")).expect("tree");
    std::fs::write(f.root.join("tree/deeper/a.txt"), "a").expect("a");
    std::fs::write(f.root.join("file.txt"), "f").expect("file");
    symlink(&f.outside, f.root.join("out")).expect("a link out");
    symlink(f.outside.join("secret.txt"), f.root.join("secret")).expect("a link to a file");

    f.sandbox.remove("file.txt").await.expect("a file");
    assert!(!f.root.join("file.txt").exists());
    f.sandbox.remove("tree").await.expect("a tree");
    assert!(!f.root.join("tree").exists());
    f.sandbox
        .remove("out")
        .await
        .expect("a link to a directory");
    f.sandbox.remove("secret").await.expect("a link to a file");
    assert!(std::fs::symlink_metadata(f.root.join("out")).is_err());
    assert_eq!(
        std::fs::read_to_string(f.outside.join("secret.txt")).expect("kept"),
        "the secret\n",
        "what a link points to stays"
    );
    assert!(matches!(
        f.sandbox.remove("gone").await,
        Err(SandboxError::NotFound { .. })
    ));
    for root in ["", "."] {
        assert!(matches!(
            f.sandbox.remove(root).await,
            Err(SandboxError::Refused { .. })
        ));
    }
    assert!(f.root.exists());
}

#[tokio::test]
async fn names_that_only_look_like_traversal_are_names() {
    let f = fixture();
    for name in [
        "%2e%2e/x",
        "..foo",
        "...",
        "a..b",
        "..\\x",
        "%2F..%2Fetc",
        "dir/.../f",
    ] {
        f.sandbox
            .write(name, name.as_bytes().to_vec())
            .await
            .unwrap_or_else(|error| panic!("write `{name}`: {error}"));
        let chunk = f.sandbox.read(name, 0, 100).await.expect("read it back");
        assert_eq!(chunk.data, name.as_bytes());
        assert!(f.root.join(name).is_file(), "`{name}` is inside the root");
    }
    // `.` components are harmless and dropped.
    let chunk = f.sandbox.read("./dir/./.../f", 0, 100).await.expect("read");
    assert_eq!(chunk.data, b"dir/.../f");
}

#[tokio::test]
async fn symlink_to_etc_is_refused() {
    let f = fixture();
    symlink("/etc", f.root.join("etc")).expect("symlink");
    let read = f.sandbox.read("etc/passwd", 0, 100).await;
    assert!(is_escape(&read), "{read:?}");
    let list = f.sandbox.list("etc").await;
    assert!(is_escape(&list), "{list:?}");
    let write = f.sandbox.write("etc/toolwright-test", b"x".to_vec()).await;
    assert!(is_escape(&write), "{write:?}");
    let write = f.sandbox.write("etc/new/dir/file", b"x".to_vec()).await;
    assert!(is_escape(&write), "{write:?}");
    let grep = f.sandbox.grep(grep_request("root", "etc")).await;
    assert!(is_escape(&grep), "{grep:?}");
    let glob = f.sandbox.glob("*", "etc", 10).await;
    assert!(is_escape(&glob), "{glob:?}");
}

#[tokio::test]
async fn symlinks_to_outside_files_and_directories_are_refused() {
    let f = fixture();
    let secret = f.outside.join("secret.txt");
    symlink(&secret, f.root.join("abs-link")).expect("absolute symlink");
    symlink("../outside/secret.txt", f.root.join("rel-link")).expect("relative symlink");
    symlink(&f.outside, f.root.join("out-dir")).expect("directory symlink");
    symlink(f.outside.join("not-yet"), f.root.join("dangling")).expect("dangling symlink");
    std::fs::create_dir(f.root.join("sub")).expect("sub");
    symlink("../../outside", f.root.join("sub/up")).expect("nested symlink");

    for link in [
        "abs-link",
        "rel-link",
        "out-dir/secret.txt",
        "sub/up/secret.txt",
    ] {
        let read = f.sandbox.read(link, 0, 100).await;
        assert!(is_escape(&read), "read `{link}`: {read:?}");
        let write = f.sandbox.write(link, b"overwritten".to_vec()).await;
        assert!(is_escape(&write), "write `{link}`: {write:?}");
    }
    for dir in ["out-dir", "sub/up"] {
        let list = f.sandbox.list(dir).await;
        assert!(is_escape(&list), "list `{dir}`: {list:?}");
    }
    // Creating a file, or missing parents, through a link that leads out.
    for path in [
        "dangling",
        "out-dir/new.txt",
        "out-dir/a/b/c.txt",
        "sub/up/x/y.txt",
    ] {
        let write = f.sandbox.write(path, b"x".to_vec()).await;
        assert!(is_escape(&write), "write `{path}`: {write:?}");
    }

    assert_eq!(
        std::fs::read_to_string(&secret).expect("secret"),
        "the secret\n"
    );
    let outside: Vec<_> = std::fs::read_dir(&f.outside)
        .expect("outside")
        .map(|entry| entry.expect("entry").file_name())
        .collect();
    assert_eq!(outside, ["secret.txt"], "nothing was created outside");
}

#[tokio::test]
async fn symlinks_inside_the_root_work_and_are_listed_as_symlinks() {
    let f = fixture();
    std::fs::create_dir(f.root.join("real")).expect("dir");
    std::fs::write(f.root.join("real/file.txt"), "inside\n").expect("file");
    symlink("real", f.root.join("alias")).expect("dir symlink");
    symlink("real/file.txt", f.root.join("file-link")).expect("file symlink");

    let chunk = f.sandbox.read("file-link", 0, 100).await.expect("read");
    assert_eq!(chunk.data, b"inside\n");
    let chunk = f
        .sandbox
        .read("alias/file.txt", 0, 100)
        .await
        .expect("read");
    assert_eq!(chunk.data, b"inside\n");
    f.sandbox
        .write("alias/other.txt", b"via the alias".to_vec())
        .await
        .expect("write through an inside symlink");
    assert!(f.root.join("real/other.txt").is_file());

    let listed = f.sandbox.list("").await.expect("list");
    let kinds: Vec<_> = listed.iter().map(|e| (e.name.as_str(), e.kind)).collect();
    assert_eq!(
        kinds,
        [
            ("alias", EntryKind::Symlink),
            ("file-link", EntryKind::Symlink),
            ("real", EntryKind::Dir),
        ]
    );
}

#[tokio::test]
async fn hard_link_to_an_outside_file_is_neither_read_nor_written() {
    let f = fixture();
    let secret = f.outside.join("secret.txt");
    std::fs::hard_link(&secret, f.root.join("linked.txt")).expect("hard link");

    let read = f.sandbox.read("linked.txt", 0, 100).await;
    match &read {
        Err(SandboxError::Refused { path, reason }) => {
            assert_eq!(path, "linked.txt");
            assert!(reason.contains("2 hard links"), "{reason}");
            assert!(reason.contains("outside the sandbox"), "{reason}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    let write = f.sandbox.write("linked.txt", b"overwritten".to_vec()).await;
    assert!(
        matches!(&write, Err(SandboxError::Refused { reason, .. }) if reason.contains("hard links")),
        "{write:?}"
    );
    assert_eq!(
        std::fs::read_to_string(&secret).expect("secret"),
        "the secret\n"
    );

    // Nor searched.
    let grep = f
        .sandbox
        .grep(grep_request("secret", ""))
        .await
        .expect("grep");
    assert!(grep.items.is_empty(), "{grep:?}");
    let glob = f.sandbox.glob("*", "", 10).await.expect("glob");
    assert!(glob.items.is_empty(), "{glob:?}");
}

#[tokio::test]
async fn a_huge_file_is_read_in_bounded_chunks() {
    let f = fixture();
    let size = 200 * 1024 * 1024;
    std::fs::File::create(f.root.join("huge.bin"))
        .and_then(|file| file.set_len(size))
        .expect("sparse file");

    let started = Instant::now();
    let chunk = f
        .sandbox
        .read("huge.bin", 100 * 1024 * 1024, 4096)
        .await
        .expect("read");
    assert_eq!(chunk.data.len(), 4096);
    assert_eq!(chunk.size, size);
    let tail = f
        .sandbox
        .read("huge.bin", size - 10, usize::MAX)
        .await
        .expect("read the tail");
    assert_eq!(tail.data.len(), 10);
    let past = f
        .sandbox
        .read("huge.bin", size + 10, 100)
        .await
        .expect("read past the end");
    assert!(past.data.is_empty());
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );

    // grep sees zeros, decides the file is binary and stops at once.
    let started = Instant::now();
    let grep = f.sandbox.grep(grep_request("x", "")).await.expect("grep");
    assert!(grep.items.is_empty());
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_binary_file_is_read_as_bytes_and_skipped_by_grep() {
    let f = fixture();
    let bytes: Vec<u8> = b"needle\0\x01\x02\xff\xfe needle\n".to_vec();
    std::fs::write(f.root.join("blob.bin"), &bytes).expect("binary");
    std::fs::write(f.root.join("text.txt"), "a needle here\n").expect("text");

    let chunk = f.sandbox.read("blob.bin", 0, 1000).await.expect("read");
    assert_eq!(chunk.data, bytes);
    assert_eq!(chunk.size, bytes.len() as u64);

    let grep = f
        .sandbox
        .grep(grep_request("needle", ""))
        .await
        .expect("grep");
    let paths: Vec<_> = grep.items.iter().map(|m| m.path.as_str()).collect();
    assert_eq!(paths, ["text.txt"]);
}

#[tokio::test]
async fn write_creates_parents_and_replaces() {
    let f = fixture();
    f.sandbox
        .write("a/b/c/file.txt", b"a longer first version".to_vec())
        .await
        .expect("write with parents");
    f.sandbox
        .write("a/b/c/file.txt", b"short".to_vec())
        .await
        .expect("replace");
    assert_eq!(
        std::fs::read(f.root.join("a/b/c/file.txt")).expect("file"),
        b"short"
    );

    let on_dir = f.sandbox.write("a/b", b"x".to_vec()).await;
    assert!(
        matches!(
            on_dir,
            Err(SandboxError::WrongKind {
                found: "a directory",
                ..
            })
        ),
        "{on_dir:?}"
    );
    let root = f.sandbox.write("", b"x".to_vec()).await;
    assert!(
        matches!(root, Err(SandboxError::WrongKind { .. })),
        "{root:?}"
    );
    let under_file = f.sandbox.write("a/b/c/file.txt/x", b"x".to_vec()).await;
    assert!(
        matches!(
            under_file,
            Err(SandboxError::WrongKind {
                expected: "a directory",
                ..
            })
        ),
        "{under_file:?}"
    );
    // A file is replaced whole (a new inode renamed over it), keeping its permissions, and no
    // temporary file is left behind.
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let script = f.root.join("run.sh");
    std::fs::write(&script, "echo old\n").expect("file");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o750)).expect("chmod");
    let before = std::fs::metadata(&script).expect("metadata");
    f.sandbox
        .write("run.sh", b"echo new\n".to_vec())
        .await
        .expect("replace");
    let after = std::fs::metadata(&script).expect("metadata");
    assert_ne!(
        before.ino(),
        after.ino(),
        "replaced, not rewritten in place"
    );
    assert_eq!(after.permissions().mode() & 0o777, 0o750);
    assert_eq!(std::fs::read(&script).expect("read"), b"echo new\n");
    let leftovers: Vec<_> = std::fs::read_dir(&f.root)
        .expect("dir")
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    // Permission bits are kept, not setuid/setgid; a name as long as the folder allows works.
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o4755)).expect("chmod");
    f.sandbox
        .write("run.sh", b"echo newer\n".to_vec())
        .await
        .expect("replace");
    let mode = std::fs::metadata(&script)
        .expect("metadata")
        .permissions()
        .mode();
    assert_eq!(mode & 0o7777, 0o755);
    let long = "n".repeat(250);
    for round in 0..2 {
        f.sandbox
            .write(&long, format!("round {round}").into_bytes())
            .await
            .expect("a 250-byte name, created then replaced");
    }
    // Renaming needs only the folder's permission: a file this process may not write is not
    // replaced (as root, every file is writable), and one owned by someone else keeps its
    // owner (written in place; only root can hand a file to someone else to try it).
    let guarded = f.root.join("guarded.txt");
    std::fs::write(&guarded, "keep\n").expect("file");
    let root_user = std::fs::metadata("/proc/self").expect("proc").uid() == 0;
    if root_user {
        std::os::unix::fs::chown(&guarded, Some(65534), Some(65534)).expect("chown");
        let before = std::fs::metadata(&guarded).expect("metadata");
        f.sandbox
            .write("guarded.txt", b"changed\n".to_vec())
            .await
            .expect("write");
        let after = std::fs::metadata(&guarded).expect("metadata");
        assert_eq!((after.uid(), after.gid()), (65534, 65534), "owner kept");
        assert_eq!(before.ino(), after.ino(), "written in place");
        assert_eq!(std::fs::read(&guarded).expect("read"), b"changed\n");
    } else {
        std::fs::set_permissions(&guarded, std::fs::Permissions::from_mode(0o444)).expect("chmod");
        let refused = f.sandbox.write("guarded.txt", b"changed\n".to_vec()).await;
        assert!(refused.is_err(), "{refused:?}");
        assert_eq!(std::fs::read(&guarded).expect("read"), b"keep\n");
    }
    // A trailing slash names a directory: no file `fresh` is created for `fresh/`.
    let slash = f.sandbox.write("fresh/", b"x".to_vec()).await;
    assert!(
        matches!(&slash, Err(SandboxError::Refused { reason, .. }) if reason.contains("ends with `/`")),
        "{slash:?}"
    );
    assert!(!f.root.join("fresh").exists());
}

#[tokio::test]
async fn read_reports_missing_files_and_directories() {
    let f = fixture();
    std::fs::create_dir(f.root.join("dir")).expect("dir");
    let missing = f.sandbox.read("nope.txt", 0, 10).await;
    assert!(
        matches!(&missing, Err(SandboxError::NotFound { path }) if path == "nope.txt"),
        "{missing:?}"
    );
    let dir = f.sandbox.read("dir", 0, 10).await;
    assert!(
        matches!(
            dir,
            Err(SandboxError::WrongKind {
                expected: "a file",
                found: "a directory",
                ..
            })
        ),
        "{dir:?}"
    );
    let listed_file = {
        std::fs::write(f.root.join("f.txt"), "x").expect("file");
        f.sandbox.list("f.txt").await
    };
    assert!(
        matches!(
            listed_file,
            Err(SandboxError::WrongKind {
                expected: "a directory",
                found: "a file",
                ..
            })
        ),
        "{listed_file:?}"
    );
}

#[tokio::test]
async fn a_fifo_is_refused_without_blocking() {
    let f = fixture();
    let made = std::process::Command::new("mkfifo")
        .arg(f.root.join("pipe"))
        .status()
        .expect("mkfifo");
    assert!(made.success());
    let read = tokio::time::timeout(Duration::from_secs(5), f.sandbox.read("pipe", 0, 10))
        .await
        .expect("read returns at once");
    assert!(
        matches!(
            read,
            Err(SandboxError::WrongKind {
                expected: "a file",
                ..
            })
        ),
        "{read:?}"
    );
    let write = tokio::time::timeout(Duration::from_secs(5), f.sandbox.write("pipe", vec![1]))
        .await
        .expect("write returns at once");
    assert!(
        matches!(
            write,
            Err(SandboxError::WrongKind {
                expected: "a file",
                ..
            })
        ),
        "{write:?}"
    );
    let listed = f.sandbox.list("").await.expect("list");
    assert_eq!(listed[0].kind, EntryKind::Other);
}

#[tokio::test]
async fn list_is_sorted_with_kinds_and_sizes() {
    let f = fixture();
    std::fs::write(f.root.join("b.txt"), "12345").expect("file");
    std::fs::write(f.root.join("A.txt"), "1").expect("file");
    std::fs::create_dir(f.root.join("c")).expect("dir");
    std::fs::write(f.root.join("c/inner"), "x").expect("file");
    std::fs::write(f.root.join(".hidden"), "123").expect("file");
    symlink("/etc/passwd", f.root.join("a-link")).expect("symlink");

    let listed = f.sandbox.list(".").await.expect("list");
    let summary: Vec<_> = listed
        .iter()
        .map(|e| (e.name.as_str(), e.kind, e.size))
        .collect();
    assert_eq!(
        summary,
        [
            (".hidden", EntryKind::File, 3),
            ("A.txt", EntryKind::File, 1),
            ("a-link", EntryKind::Symlink, 0),
            ("b.txt", EntryKind::File, 5),
            ("c", EntryKind::Dir, 0),
        ]
    );
    assert_eq!(f.sandbox.list("").await.expect("list"), listed);
    let inner = f.sandbox.list("c/").await.expect("list c");
    assert_eq!(inner.len(), 1);
    assert_eq!(inner[0].name, "inner");
}

fn tree(root: &Path) {
    let files: &[(&str, &str)] = &[
        (
            "src/lib.rs",
            "fn alpha() {}\nfn beta() {}\n// later: gamma\n",
        ),
        ("src/main.rs", "fn main() { alpha(); }\n"),
        ("src/nested/deep.rs", "fn Alpha_deep() {}\n"),
        ("docs/guide.md", "alpha and omega\n"),
        ("notes.txt", "ALPHA in capitals\n"),
        (".hidden/secret.rs", "fn alpha_hidden() {}\n"),
        (".env", "alpha=1\n"),
        ("target/debug/out.rs", "fn alpha_ignored() {}\n"),
        (".gitignore", "target/\n*.log\n"),
        ("build.log", "alpha in a log\n"),
    ];
    for (path, contents) in files {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("dirs");
        std::fs::write(path, contents).expect("file");
    }
}

#[tokio::test]
async fn grep_finds_sorted_matches_and_reads_no_ignore_file() {
    let f = fixture();
    tree(&f.root);
    symlink("src/lib.rs", f.root.join("lib-link.rs")).expect("inside symlink");
    symlink(f.outside.join("secret.txt"), f.root.join("secret-link")).expect("outside symlink");
    std::fs::write(f.outside.join("secret.txt"), "alpha outside\n").expect("secret");

    let found = f
        .sandbox
        .grep(grep_request("alpha", ""))
        .await
        .expect("grep");
    let hits: Vec<_> = found
        .items
        .iter()
        .map(|m| (m.path.as_str(), m.line, m.text.as_str()))
        .collect();
    assert_eq!(
        hits,
        [
            // `.gitignore` is not read: ignore files are opened by real path, unconfined.
            ("build.log", 1, "alpha in a log"),
            ("docs/guide.md", 1, "alpha and omega"),
            ("src/lib.rs", 1, "fn alpha() {}"),
            ("src/main.rs", 1, "fn main() { alpha(); }"),
            ("target/debug/out.rs", 1, "fn alpha_ignored() {}"),
        ]
    );
    assert!(!found.truncated);

    let mut request = grep_request("alpha", "");
    request.case_insensitive = true;
    let found = f.sandbox.grep(request).await.expect("grep -i");
    let paths: Vec<_> = found.items.iter().map(|m| m.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "build.log",
            "docs/guide.md",
            "notes.txt",
            "src/lib.rs",
            "src/main.rs",
            "src/nested/deep.rs",
            "target/debug/out.rs"
        ]
    );

    let mut request = grep_request("(?i)alpha", "src");
    request.glob = Some("*.rs".to_owned());
    let found = f.sandbox.grep(request).await.expect("grep in src");
    let paths: Vec<_> = found.items.iter().map(|m| m.path.as_str()).collect();
    assert_eq!(paths, ["src/lib.rs", "src/main.rs", "src/nested/deep.rs"]);

    let mut request = grep_request("alpha", "");
    request.glob = Some("src/*.rs".to_owned());
    let found = f
        .sandbox
        .grep(request)
        .await
        .expect("grep with a path glob");
    let paths: Vec<_> = found.items.iter().map(|m| m.path.as_str()).collect();
    assert_eq!(paths, ["src/lib.rs", "src/main.rs"]);

    let one_file = f
        .sandbox
        .grep(grep_request("fn", "src/lib.rs"))
        .await
        .expect("grep a file");
    assert_eq!(one_file.items.len(), 2);
    assert_eq!(one_file.items[1].line, 2);
}

#[tokio::test]
async fn grep_stops_at_max_matches() {
    let f = fixture();
    let many: String = (0..50).map(|i| format!("match {i}\n")).collect();
    std::fs::write(f.root.join("a.txt"), &many).expect("file");
    std::fs::write(f.root.join("b.txt"), &many).expect("file");
    let mut request = grep_request("match", "");
    request.max_matches = 60;
    let found = f.sandbox.grep(request).await.expect("grep");
    assert_eq!(found.items.len(), 60);
    assert!(found.truncated);
    assert!(
        found
            .items
            .windows(2)
            .all(|w| (&w[0].path, w[0].line) < (&w[1].path, w[1].line))
    );

    let mut request = grep_request("match", "a.txt");
    request.max_matches = 50;
    let exact = f.sandbox.grep(request).await.expect("grep");
    assert_eq!(exact.items.len(), 50);
    assert!(!exact.truncated, "exactly the limit is not a cut");

    let long = "x".repeat(2000);
    std::fs::write(f.root.join("long.txt"), format!("{long}\r\n")).expect("file");
    let found = f
        .sandbox
        .grep(grep_request("x+", "long.txt"))
        .await
        .expect("grep");
    assert_eq!(found.items[0].text.chars().count(), 500);
}

#[tokio::test]
async fn grep_refuses_a_bad_pattern_and_missing_path() {
    let f = fixture();
    let bad = f.sandbox.grep(grep_request("fn(", "")).await;
    assert!(
        matches!(&bad, Err(SandboxError::Refused { reason, .. }) if reason.contains("regular expression")),
        "{bad:?}"
    );
    let missing = f.sandbox.grep(grep_request("x", "nope")).await;
    assert!(
        matches!(missing, Err(SandboxError::NotFound { .. })),
        "{missing:?}"
    );
}

#[tokio::test]
async fn grep_and_glob_stop_after_visiting_the_walk_limit() {
    let f = fixture();
    for i in 0..40 {
        std::fs::write(f.root.join(format!("f{i:02}.txt")), "needle\n").expect("file");
    }
    let sandbox = LocalSandbox::open(&f.root).expect("open").walk_limit(10);
    // The root is the first entry: nine files are seen, and the results say they are cut.
    let found = sandbox.glob("*.txt", "", 100).await.expect("glob");
    assert_eq!(found.items.len(), 9, "{found:?}");
    assert!(found.truncated);
    let grep = sandbox
        .grep(grep_request("needle", ""))
        .await
        .expect("grep");
    assert_eq!(grep.items.len(), 9, "{grep:?}");
    assert!(grep.truncated);
    // Under the limit, everything.
    let all = f.sandbox.glob("*.txt", "", 100).await.expect("glob");
    assert_eq!(all.items.len(), 40);
    assert!(!all.truncated);
}

#[tokio::test]
async fn glob_matches_relative_paths_with_a_limit() {
    let f = fixture();
    tree(&f.root);
    symlink("src/lib.rs", f.root.join("link.rs")).expect("symlink");

    let all = f.sandbox.glob("**/*.rs", "", 100).await.expect("glob");
    assert_eq!(
        all.items,
        [
            "src/lib.rs",
            "src/main.rs",
            "src/nested/deep.rs",
            "target/debug/out.rs"
        ]
    );
    assert!(!all.truncated);

    let top = f
        .sandbox
        .glob("*.rs", "src", 100)
        .await
        .expect("glob in src");
    assert_eq!(
        top.items,
        ["src/lib.rs", "src/main.rs"],
        "`*` stays in one directory"
    );

    let cut = f.sandbox.glob("**/*", "", 2).await.expect("glob");
    assert_eq!(cut.items.len(), 2);
    assert!(cut.truncated);

    let logs = f.sandbox.glob("*.log", "", 10).await.expect("glob");
    assert_eq!(
        logs.items,
        ["build.log"],
        "no ignore file is read: {logs:?}"
    );

    let bad = f.sandbox.glob("a[", "", 10).await;
    assert!(matches!(bad, Err(SandboxError::Refused { .. })), "{bad:?}");
    let on_file = f.sandbox.glob("*", "notes.txt", 10).await;
    assert!(
        matches!(on_file, Err(SandboxError::WrongKind { .. })),
        "{on_file:?}"
    );
}

#[tokio::test]
async fn exec_runs_in_the_root_and_reports_both_streams() {
    let f = fixture();
    let output = f
        .sandbox
        .exec(
            exec_request(
                "pwd; echo to-stderr >&2; exit 3",
                Duration::from_secs(10),
                1000,
            ),
            &NeverCancelled,
        )
        .await
        .expect("exec");
    assert_eq!(output.stdout, format!("{}\n", f.root.display()));
    assert_eq!(output.stderr, "to-stderr\n");
    assert_eq!(output.exit_code, Some(3));
    assert!(!output.timed_out);
    assert!(!output.truncated);
}

#[tokio::test]
async fn exec_output_is_cut_at_max_output_on_a_character_boundary() {
    let f = fixture();
    let output = f
        .sandbox
        .exec(
            exec_request(
                "printf 'a\\303\\251b'; printf 'xyz' >&2",
                Duration::from_secs(10),
                2,
            ),
            &NeverCancelled,
        )
        .await
        .expect("exec");
    assert_eq!(
        output.stdout, "a",
        "`é` cut in half is dropped, not replaced"
    );
    assert_eq!(output.stderr, "xy");
    assert!(output.truncated);
    assert_eq!(output.exit_code, Some(0));
}

#[tokio::test]
async fn exec_environment_is_scrubbed() {
    let f = fixture();
    let sandbox = f.sandbox.clone().env("TOOLWRIGHT_GIVEN", "given value");
    let output = sandbox
        .exec(
            exec_request("env", Duration::from_secs(10), 100_000),
            &NeverCancelled,
        )
        .await
        .expect("exec");
    let seen: Vec<(&str, &str)> = output
        .stdout
        .lines()
        .filter_map(|line| line.split_once('='))
        .collect();
    let names: BTreeSet<&str> = seen.iter().map(|(name, _)| *name).collect();
    // `PWD` is the shell's own (dash exports it), set to the root.
    let allowed = BTreeSet::from(["PATH", "HOME", "LANG", "PWD", "TOOLWRIGHT_GIVEN"]);
    assert!(names.is_subset(&allowed), "unexpected variables: {names:?}");
    let value = |name: &str| seen.iter().find(|(n, _)| *n == name).map(|(_, v)| *v);
    assert_eq!(value("PATH"), Some("/usr/local/bin:/usr/bin:/bin"));
    assert_eq!(value("HOME"), f.root.to_str());
    assert_eq!(value("LANG"), Some("C.UTF-8"));
    assert_eq!(value("TOOLWRIGHT_GIVEN"), Some("given value"));

    // Everything this test process has (cargo sets `CARGO`, `CARGO_PKG_NAME`, ... and the
    // environment usually has `RUSTUP_HOME`) stays out.
    assert!(std::env::var_os("CARGO").is_some(), "cargo test sets CARGO");
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy().into_owned();
        if !allowed.contains(name.as_str()) {
            assert!(
                !names.contains(name.as_str()),
                "`{name}` leaked into the command"
            );
        }
    }
    assert!(!names.contains("CARGO") && !names.contains("RUSTUP_HOME"));
}

#[tokio::test]
async fn exec_rejects_a_bad_variable_name() {
    let f = fixture();
    let sandbox = f.sandbox.clone().env("A=B", "x");
    let output = sandbox
        .exec(ExecRequest::new("true"), &NeverCancelled)
        .await;
    assert!(
        matches!(output, Err(SandboxError::Command(_))),
        "{output:?}"
    );
}

#[tokio::test]
async fn exec_timeout_kills_background_processes_too() {
    let f = fixture();
    let started = Instant::now();
    let output = f
        .sandbox
        .exec(
            exec_request(
                "sleep 30 & echo $! > bg.pid; echo started; sleep 30",
                Duration::from_secs(1),
                1000,
            ),
            &NeverCancelled,
        )
        .await
        .expect("exec");
    assert!(output.timed_out);
    assert_eq!(output.exit_code, None);
    assert_eq!(output.stdout, "started\n", "output so far is kept");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );

    let pid = read_pid(&f.root.join("bg.pid"));
    assert!(
        process_gone(pid),
        "the background `sleep 30` ({pid}) is still running"
    );
    let kill = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "kill -0 {pid} 2>/dev/null && ! grep -q '^State:.*Z' /proc/{pid}/status"
        ))
        .status()
        .expect("kill -0");
    assert!(!kill.success(), "`kill -0 {pid}` finds a live process");
}

#[tokio::test]
async fn exec_background_processes_do_not_outlive_a_finished_command() {
    let f = fixture();
    // Detached from the pipes, and still holding them: either way the command is over when the
    // shell exits (after a short wait for the pipes), not at its timeout.
    for (command, stdout) in [
        (
            "sleep 30 >/dev/null 2>&1 & echo $! > bg.pid; echo hi",
            "hi\n",
        ),
        ("sleep 30 & echo $! > bg.pid; echo hi", "hi\n"),
    ] {
        let started = Instant::now();
        let output = f
            .sandbox
            .exec(
                exec_request(command, Duration::from_secs(60), 1000),
                &NeverCancelled,
            )
            .await
            .expect("exec");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(output.exit_code, Some(0), "{command}");
        assert_eq!(output.stdout, stdout, "{command}");
        assert!(!output.timed_out, "{command}");
        let pid = read_pid(&f.root.join("bg.pid"));
        assert!(
            process_gone(pid),
            "`{command}`: the background `sleep 30` ({pid}) is still running"
        );
    }
}

#[tokio::test]
async fn exec_cancellation_kills_the_command() {
    let f = fixture();
    let started = Instant::now();
    let cancel = CancelAt(tokio::time::Instant::now() + Duration::from_millis(200));
    let output = f
        .sandbox
        .exec(
            exec_request(
                "echo $$ > sh.pid; sleep 30 & echo $! > bg.pid; wait",
                Duration::from_secs(60),
                1000,
            ),
            &cancel,
        )
        .await
        .expect("exec");
    let elapsed = started.elapsed();
    assert!(elapsed < Duration::from_secs(5), "{elapsed:?}");
    assert!(elapsed >= Duration::from_millis(200), "{elapsed:?}");
    assert!(!output.timed_out);
    assert_eq!(output.exit_code, None);
    for file in ["sh.pid", "bg.pid"] {
        let pid = read_pid(&f.root.join(file));
        assert!(
            process_gone(pid),
            "the process in {file} ({pid}) is still running"
        );
    }

    // Already cancelled: not even started.
    let output = f
        .sandbox
        .exec(
            exec_request("touch ran", Duration::from_secs(10), 1000),
            &cancel,
        )
        .await
        .expect("exec");
    assert_eq!(output.exit_code, None);
    assert!(!f.root.join("ran").exists());
}

#[tokio::test]
async fn dropping_the_exec_future_kills_the_command() {
    let f = fixture();
    let running = f.sandbox.exec(
        exec_request(
            "sleep 30 & echo $! > bg.pid; wait",
            Duration::from_secs(60),
            1000,
        ),
        &NeverCancelled,
    );
    let abandoned = tokio::time::timeout(Duration::from_millis(300), running).await;
    assert!(abandoned.is_err(), "the command was still running");
    let pid = read_pid(&f.root.join("bg.pid"));
    assert!(
        process_gone(pid),
        "the background `sleep 30` ({pid}) is still running"
    );
}

#[tokio::test]
async fn exec_output_is_capped_while_gigabytes_are_drained() {
    let f = fixture();
    let started = Instant::now();
    let output = f
        .sandbox
        .exec(
            exec_request(
                "head -c 3000000000 /dev/zero; echo done >&2",
                Duration::from_secs(15),
                1000,
            ),
            &NeverCancelled,
        )
        .await
        .expect("exec");
    assert_eq!(output.stdout.len(), 1000);
    assert!(output.stdout.bytes().all(|b| b == 0));
    assert!(output.truncated);
    // Finished (read to the end) or killed at the timeout; either way in bounded time.
    assert!(output.timed_out || output.stderr == "done\n", "{output:?}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    // Nothing near the 3 GB written was held at once.
    let peak = peak_rss_bytes();
    assert!(peak < 1024 * 1024 * 1024, "peak RSS {peak} bytes");
}

/// Ignore files are never opened: one linked to `/dev/zero` would grow without end, a FIFO would
/// block, one linked outside would leak its lines through what is skipped.
#[tokio::test]
async fn hostile_ignore_files_are_not_read() {
    let f = fixture();
    std::fs::write(f.root.join("a.txt"), "alpha\n").expect("file");
    symlink("/dev/zero", f.root.join(".gitignore")).expect("zero link");
    std::fs::create_dir(f.root.join("sub")).expect("dir");
    let fifo = f.root.join("sub/.ignore");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo")
            .success()
    );
    std::fs::write(f.root.join(".git"), "gitdir: /etc\n").expect("git file");
    let found = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        f.sandbox.grep(grep_request("alpha", "")),
    )
    .await
    .expect("grep returns")
    .expect("grep");
    assert_eq!(found.items.len(), 1, "{found:?}");
    let globbed = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        f.sandbox.glob("**/*", "", 10),
    )
    .await
    .expect("glob returns")
    .expect("glob");
    assert!(globbed.items.contains(&"a.txt".to_owned()), "{globbed:?}");
}
