//! The file operations (`read`, `write`, `list`) and what they share with the searches: paths
//! resolved beneath the root's handle, the checks on what a path names, and the sandbox's errors
//! for a failed system call.

use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Component, Path, PathBuf};

use cap_fs_ext::{FollowSymlinks, OpenOptionsFollowExt, OpenOptionsSyncExt};
use cap_std::fs::{Dir, Metadata, MetadataExt, OpenOptions, OpenOptionsExt, PermissionsExt};
use toolwright_core::{DirEntry, EntryKind, FileChunk, SandboxError};

/// `path` as a relative path beneath the root, `.` components dropped; refused as an escape when
/// absolute or when it has a `..` anywhere (even `a/../b`: which `a` it crosses could be a
/// symlink, and a plain name is never needed).
pub(super) fn beneath(path: &str) -> Result<PathBuf, SandboxError> {
    let escape = || SandboxError::Escape {
        path: path.to_owned(),
    };
    let mut relative = PathBuf::new();
    for component in Path::new(path).components() {
        match component {
            Component::Normal(name) => relative.push(name),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                return Err(escape());
            }
        }
    }
    Ok(relative)
}

/// Whether cap-std refused to resolve a path because it led outside the directory. It reports
/// that as `PermissionDenied` with its own message, where a real `EACCES` carries an OS code.
fn is_escape(error: &io::Error) -> bool {
    error.kind() == io::ErrorKind::PermissionDenied && error.raw_os_error().is_none()
}

/// Maps a failed operation on `path` (as given) to the sandbox's errors.
pub(super) fn classify(path: &str, error: &io::Error) -> SandboxError {
    let path = path.to_owned();
    if is_escape(error) {
        return SandboxError::Escape { path };
    }
    match error.kind() {
        io::ErrorKind::NotFound => SandboxError::NotFound { path },
        io::ErrorKind::IsADirectory => SandboxError::WrongKind {
            path,
            expected: "a file",
            found: "a directory",
        },
        io::ErrorKind::NotADirectory => SandboxError::Io {
            path,
            message: "one of its parents is a file, not a directory; check the path".to_owned(),
        },
        _ => io_error(&path, error),
    }
}

pub(super) fn io_error(path: &str, error: &io::Error) -> SandboxError {
    let message = match error.kind() {
        io::ErrorKind::PermissionDenied => {
            "permission denied; the host's user cannot access it, choose another path".to_owned()
        }
        _ => {
            // The system's messages start with a capital ("No space left on device").
            let system = error.to_string();
            let mut chars = system.chars();
            let first = chars.next().map(|c| c.to_lowercase().to_string());
            format!("{}{}", first.unwrap_or_default(), chars.as_str())
        }
    };
    SandboxError::Io {
        path: path.to_owned(),
        message,
    }
}

pub(super) fn kind_name(metadata: &Metadata) -> &'static str {
    let file_type = metadata.file_type();
    if file_type.is_file() {
        "a file"
    } else if file_type.is_dir() {
        "a directory"
    } else if file_type.is_symlink() {
        "a symlink"
    } else {
        "a special file (pipe, socket or device)"
    }
}

/// Refuses what `read` and `write` must not touch: anything but a regular file, and a regular
/// file with other hard links (one of them may be outside the root).
fn check_plain_file(path: &str, metadata: &Metadata) -> Result<(), SandboxError> {
    if !metadata.is_file() {
        return Err(SandboxError::WrongKind {
            path: path.to_owned(),
            expected: "a file",
            found: kind_name(metadata),
        });
    }
    let links = metadata.nlink();
    if links > 1 {
        return Err(SandboxError::Refused {
            path: path.to_owned(),
            reason: format!(
                "has {links} hard links, and one may be a file outside the sandbox, so it is \
                 neither read nor overwritten; write the contents you need to a new path"
            ),
        });
    }
    Ok(())
}

/// Opens `relative` beneath `dir` without blocking on a pipe (`O_NONBLOCK` makes opening a FIFO
/// return at once; the caller then refuses it as not a regular file).
pub(super) fn open_file(
    dir: &Dir,
    relative: &Path,
    options: &mut OpenOptions,
) -> io::Result<cap_std::fs::File> {
    dir.open_with(relative, options.nonblock(true))
}

/// Maps a failed open: when something other than a regular file is in the way (a directory, a
/// pipe without a reader), says what it is rather than the system's message.
fn open_error(dir: &Dir, relative: &Path, path: &str, error: &io::Error) -> SandboxError {
    if !is_escape(error)
        && let Ok(metadata) = dir.metadata(relative)
        && !metadata.is_file()
    {
        return SandboxError::WrongKind {
            path: path.to_owned(),
            expected: "a file",
            found: kind_name(&metadata),
        };
    }
    classify(path, error)
}

pub(super) fn read_chunk(
    dir: &Dir,
    path: &str,
    offset: u64,
    limit: usize,
) -> Result<FileChunk, SandboxError> {
    let relative = beneath(path)?;
    if relative.as_os_str().is_empty() {
        return Err(SandboxError::WrongKind {
            path: path.to_owned(),
            expected: "a file",
            found: "a directory",
        });
    }
    let file = open_file(dir, &relative, OpenOptions::new().read(true))
        .map_err(|error| open_error(dir, &relative, path, &error))?;
    // Checked on the open handle, not the path: it is the file that will be read.
    let metadata = file.metadata().map_err(|error| classify(path, &error))?;
    check_plain_file(path, &metadata)?;
    let size = metadata.len();
    let available = size.saturating_sub(offset);
    let wanted = u64::try_from(limit).unwrap_or(u64::MAX).min(available);
    let mut file = file.into_std();
    file.seek(SeekFrom::Start(offset))
        .map_err(|error| classify(path, &error))?;
    let mut data = Vec::with_capacity(usize::try_from(wanted).unwrap_or(limit));
    file.take(wanted)
        .read_to_end(&mut data)
        .map_err(|error| classify(path, &error))?;
    Ok(FileChunk { data, size })
}

/// Maps a failure to create the parents `parent` of `path`. `create_dir_all` reports a symlink
/// leading out, or a file in the way, as "already exists"; looking at each ancestor in turn tells
/// which it was.
fn parent_error(dir: &Dir, parent: &Path, path: &str, error: &io::Error) -> SandboxError {
    let mut ancestor = PathBuf::new();
    for component in parent.components() {
        ancestor.push(component);
        match dir.metadata(&ancestor) {
            Ok(metadata) if metadata.is_dir() => {}
            Ok(metadata) => {
                return SandboxError::WrongKind {
                    path: slash_path(&ancestor),
                    expected: "a directory",
                    found: kind_name(&metadata),
                };
            }
            Err(error) if is_escape(&error) => {
                return SandboxError::Escape {
                    path: path.to_owned(),
                };
            }
            Err(_) => break,
        }
    }
    classify(&slash_path(parent), error)
}

pub(super) fn write_file(dir: &Dir, path: &str, contents: &[u8]) -> Result<(), SandboxError> {
    let relative = beneath(path)?;
    // `notes/` would otherwise write the file `notes`: the path's components drop the slash.
    if path.ends_with('/') || path.ends_with("/.") {
        return Err(SandboxError::Refused {
            path: path.to_owned(),
            reason: "names a directory (it ends with `/`); give the path of a file".to_owned(),
        });
    }
    let Some(parent) = relative.parent() else {
        return Err(SandboxError::WrongKind {
            path: path.to_owned(),
            expected: "a file",
            found: "a directory",
        });
    };
    if !parent.as_os_str().is_empty() {
        dir.create_dir_all(parent)
            .map_err(|error| parent_error(dir, parent, path, &error))?;
    }
    // What is there now, the last component not followed.
    match dir.symlink_metadata(&relative) {
        // A symlink inside the root is written through (the link stays a link).
        Ok(metadata) if metadata.file_type().is_symlink() => {}
        Ok(metadata) => {
            check_plain_file(path, &metadata)?;
            // Renaming needs only the folder's write permission: open the file for writing
            // first, so that a file this process may not write is not replaced either, and
            // check the handle (the path may have changed since).
            let existing = open_file(
                dir,
                &relative,
                OpenOptions::new().write(true).follow(FollowSymlinks::No),
            )
            .map_err(|error| open_error(dir, &relative, path, &error))?;
            let metadata = existing
                .metadata()
                .map_err(|error| classify(path, &error))?;
            check_plain_file(path, &metadata)?;
            drop(existing);
            if replace_file(dir, &relative, path, contents, Some(&metadata))? {
                return Ok(());
            }
            // Owned by someone else: written in place, which keeps its owner.
        }
        Err(error) if error.kind() == io::ErrorKind::NotFound => {
            if replace_file(dir, &relative, path, contents, None)? {
                return Ok(());
            }
        }
        Err(error) => return Err(open_error(dir, &relative, path, &error)),
    }
    // Not truncated on open: the link count is checked first, and truncating a hard link would
    // already have destroyed the outside file's contents.
    let file = open_file(dir, &relative, OpenOptions::new().write(true).create(true))
        .map_err(|error| open_error(dir, &relative, path, &error))?;
    let metadata = file.metadata().map_err(|error| classify(path, &error))?;
    check_plain_file(path, &metadata)?;
    file.set_len(0).map_err(|error| classify(path, &error))?;
    let mut file = file.into_std();
    file.write_all(contents)
        .map_err(|error| classify(path, &error))?;
    Ok(())
}

/// Writes `contents` to a new file beside `relative` and renames it over `relative`: readers see
/// the old contents or the new ones, never an empty or half-written file, and a crash mid-write
/// leaves the old file as it was. A replaced file keeps its permission bits (not setuid, setgid
/// or sticky); `false`, with nothing changed, when it belongs to another user or group, whom a
/// new file would not keep.
fn replace_file(
    dir: &Dir,
    relative: &Path,
    path: &str,
    contents: &[u8],
    existing: Option<&Metadata>,
) -> Result<bool, SandboxError> {
    // Hidden, so `grep` and `glob` skip it while it exists; a fixed length, so any name that
    // fits the folder fits it too.
    let temporary = relative.with_file_name(format!(
        ".tw-{}.tmp",
        &uuid::Uuid::new_v4().simple().to_string()[..16]
    ));
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    if existing.is_some() {
        // Nobody else reads the new contents of a private file while they are written.
        options.mode(0o600);
    }
    let mut file =
        open_file(dir, &temporary, &mut options).map_err(|error| classify(path, &error))?;
    if let Some(existing) = existing {
        let mine = file.metadata().map_err(|error| classify(path, &error))?;
        if mine.uid() != existing.uid() || mine.gid() != existing.gid() {
            drop(file);
            let _ = dir.remove_file(&temporary);
            return Ok(false);
        }
    }
    let written =
        file.write_all(contents)
            .and_then(|()| match existing {
                Some(existing) => file
                    .set_permissions(cap_std::fs::Permissions::from_mode(existing.mode() & 0o777)),
                None => Ok(()),
            })
            .and_then(|()| file.sync_data())
            .and_then(|()| dir.rename(&temporary, dir, relative));
    if let Err(error) = written {
        let _ = dir.remove_file(&temporary);
        return Err(open_error(dir, relative, path, &error));
    }
    Ok(true)
}

pub(super) fn list_dir(dir: &Dir, path: &str) -> Result<Vec<DirEntry>, SandboxError> {
    let relative = beneath(path)?;
    let opened;
    let target = if relative.as_os_str().is_empty() {
        dir
    } else {
        opened = dir.open_dir(&relative).map_err(|error| {
            if error.kind() == io::ErrorKind::NotADirectory
                && let Ok(metadata) = dir.metadata(&relative)
            {
                return SandboxError::WrongKind {
                    path: path.to_owned(),
                    expected: "a directory",
                    found: kind_name(&metadata),
                };
            }
            classify(path, &error)
        })?;
        &opened
    };
    let mut entries = Vec::new();
    for entry in target.entries().map_err(|error| classify(path, &error))? {
        let entry = entry.map_err(|error| classify(path, &error))?;
        let name = entry.file_name();
        // Not followed: a symlink is reported as one, whatever it points at.
        let metadata = match target.symlink_metadata(&name) {
            Ok(metadata) => metadata,
            // Removed between listing and looking: it is no longer an entry.
            Err(error) if error.kind() == io::ErrorKind::NotFound => continue,
            Err(error) => return Err(classify(path, &error)),
        };
        let file_type = metadata.file_type();
        let (kind, size) = if file_type.is_file() {
            (EntryKind::File, metadata.len())
        } else if file_type.is_dir() {
            (EntryKind::Dir, 0)
        } else if file_type.is_symlink() {
            (EntryKind::Symlink, 0)
        } else {
            (EntryKind::Other, 0)
        };
        entries.push(DirEntry {
            name: name.to_string_lossy().into_owned(),
            kind,
            size,
        });
    }
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(entries)
}

/// `/`-separated, whatever the platform's separator.
pub(super) fn slash_path(path: &Path) -> String {
    let parts: Vec<_> = path
        .components()
        .map(|component| component.as_os_str().to_string_lossy())
        .collect();
    parts.join("/")
}

/// Removes the file, symbolic link or directory tree at `path`; the root itself is refused.
pub(super) fn remove_path(dir: &Dir, path: &str) -> Result<(), SandboxError> {
    let relative = beneath(path)?;
    if relative.as_os_str().is_empty() {
        return Err(SandboxError::Refused {
            path: path.to_owned(),
            reason: "is the sandbox's root, which cannot be removed; name what is inside it"
                .to_owned(),
        });
    }
    let metadata = dir
        .symlink_metadata(&relative)
        .map_err(|error| classify(path, &error))?;
    let removed = if metadata.is_dir() {
        dir.remove_dir_all(&relative)
    } else {
        dir.remove_file(&relative)
    };
    removed.map_err(|error| classify(path, &error))
}
