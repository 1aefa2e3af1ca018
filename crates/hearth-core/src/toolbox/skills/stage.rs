//! Staging: the valid packages are copied into a new generation folder, named by the fingerprint
//! of their content, and a link the runtime reads (`skills.paths`, one constant path, so the
//! runtime configuration and its process stay the same) is swapped to it with rename(2). A run
//! that started on the previous generation may still read it, so that one is kept; older ones go.
//! Nothing is copied while the content is unchanged: file digests are remembered per file
//! (size, times, inode), so an unchanged check reads only each SKILL.md.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use sha2::{Digest, Sha256};

use super::tree::{self, CopyFailure, FileDigest};
use super::{add, scan, AddSkillError, Scanned, SkillError, SkillPackage};

/// Hex characters of the content fingerprint in a generation's name.
const GENERATION_ID_CHARS: usize = 16;
/// Hidden prefixes of work in progress beside the link (removed when found later).
const STAGING_PREFIX: &str = ".staging-";
const LINK_PREFIX: &str = ".link-";

/// Why the packages could not be staged. The previous generation stays in place.
#[derive(Debug, thiserror::Error)]
pub enum StageError {
    #[error(transparent)]
    Source(#[from] SkillError),
    #[error("Hearth could not write the staged skills in {dir}: {source}")]
    Write { dir: PathBuf, source: std::io::Error },
    #[error("Hearth could not switch the runtime to the newly staged skills ({link}): {source}")]
    Swap { link: PathBuf, source: std::io::Error },
}

/// The outcome of a check: every package folder (valid or why not) and whether a new generation
/// became current.
#[derive(Debug)]
pub struct StageReport {
    pub packages: Vec<Scanned>,
    pub restaged: bool,
    /// The current generation folder.
    pub generation: PathBuf,
}

/// What identifies a file's content without reading it again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
    inode: (u64, u64),
}

impl Stamp {
    fn of(path: &Path) -> Option<Self> {
        let m = std::fs::metadata(path).ok()?;
        Some(Self { len: m.len(), mtime: (m.mtime(), m.mtime_nsec()), ctime: (m.ctime(), m.ctime_nsec()), inode: (m.dev(), m.ino()) })
    }
}

/// Stages the packages of one skills folder behind one link. Checks are serialised.
pub struct SkillStager {
    source: PathBuf,
    link: PathBuf,
    digests: Mutex<HashMap<PathBuf, (Stamp, FileDigest)>>,
}

impl SkillStager {
    /// `source` holds the user's package folders; `link` is the path given to the runtime.
    pub fn new(source: impl Into<PathBuf>, link: impl Into<PathBuf>) -> Self {
        Self { source: source.into(), link: link.into(), digests: Mutex::default() }
    }

    /// The one path for the runtime's `skills.paths`; it never changes.
    pub fn link(&self) -> &Path {
        &self.link
    }

    pub fn source(&self) -> &Path {
        &self.source
    }

    fn dir(&self) -> &Path {
        self.link.parent().unwrap_or(Path::new("."))
    }

    fn link_name(&self) -> String {
        self.link.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default()
    }

    /// The generation the link points at now, by name.
    fn current(&self) -> Option<String> {
        let target = std::fs::read_link(&self.link).ok()?;
        Some(target.file_name()?.to_string_lossy().to_string())
    }

    /// Check the packages and, if their content changed, stage the valid ones as a new
    /// generation and point the link at it.
    pub fn refresh(&self) -> Result<StageReport, StageError> {
        let mut digests = self.digests.lock().unwrap_or_else(|p| p.into_inner());
        let mut packages = scan(&self.source)?;
        let fingerprint = self.fingerprint(&mut packages, &mut digests);
        let wanted = self.generation_name(&fingerprint);
        let current = self.current();
        if current.as_deref() == Some(wanted.as_str()) && self.dir().join(&wanted).is_dir() {
            return Ok(StageReport { packages, restaged: false, generation: self.dir().join(wanted) });
        }
        let generation = self.build(&mut packages)?;
        self.point_link_at(&generation)?;
        self.remove_old(&generation, current.as_deref());
        tracing::info!(generation, staged = packages.iter().filter(|p| p.package.is_ok()).count(), "skills staged");
        Ok(StageReport { packages, restaged: true, generation: self.dir().join(generation) })
    }

    /// Copy `folder` into the skills folder as a new package (checked first, bounded, never half
    /// copied). An existing package of that name is replaced only when `replace` says so.
    pub fn add(&self, folder: &Path, replace: bool) -> Result<SkillPackage, AddSkillError> {
        // Held so that no check sees the skills folder between the two renames of a replacement.
        let _serial = self.digests.lock().unwrap_or_else(|p| p.into_inner());
        add::add_package(folder, &self.source, replace)
    }

    fn generation_name(&self, fingerprint: &[u8; 32]) -> String {
        let hex: String = fingerprint.iter().map(|b| format!("{b:02x}")).collect();
        format!("{}.{}", self.link_name(), &hex[..GENERATION_ID_CHARS])
    }

    /// The content fingerprint of the valid packages, from remembered digests where a file's stamp
    /// is unchanged. A package whose file cannot be read, or changes meanwhile, is left out.
    fn fingerprint(&self, packages: &mut [Scanned], digests: &mut HashMap<PathBuf, (Stamp, FileDigest)>) -> [u8; 32] {
        let mut seen = HashMap::new();
        let mut hashed = Vec::new();
        for scanned in packages.iter_mut() {
            let Ok(package) = &scanned.package else { continue };
            let mut files = Vec::with_capacity(package.files.len());
            let mut failure = None;
            for file in &package.files {
                let path = package.dir.join(&file.relative);
                let stamp = Stamp::of(&path);
                let known = digests.get(&path).filter(|(s, _)| Some(*s) == stamp && s.len == file.len).map(|(_, d)| *d);
                let digest = match known.map(Ok).unwrap_or_else(|| tree::digest(package, file)) {
                    Ok(d) => d,
                    Err(CopyFailure::Package(problem)) => {
                        failure = Some(problem);
                        break;
                    }
                    Err(CopyFailure::Write(..)) => unreachable!("hashing writes nothing"),
                };
                if let Some(stamp) = stamp {
                    seen.insert(path, (stamp, digest));
                }
                files.push(digest);
            }
            match failure {
                Some(problem) => scanned.package = Err(problem),
                None => hashed.push((package.clone(), files)),
            }
        }
        *digests = seen;
        content_fingerprint(&hashed)
    }

    /// Copy the valid packages into a new generation folder and return its name. A package that
    /// changes or cannot be read meanwhile is left out and reported; the folder is named by what
    /// was actually copied.
    fn build(&self, packages: &mut [Scanned]) -> Result<String, StageError> {
        let write = |dir: &Path| {
            let dir = dir.to_path_buf();
            move |source| StageError::Write { dir, source }
        };
        std::fs::create_dir_all(self.dir()).map_err(write(self.dir()))?;
        let staging = tempfile::Builder::new().prefix(STAGING_PREFIX).tempdir_in(self.dir()).map_err(write(self.dir()))?;
        let mut copied = Vec::new();
        for scanned in packages.iter_mut() {
            let Ok(package) = &scanned.package else { continue };
            let dest = staging.path().join(&package.name);
            match tree::copy_package(package, &dest) {
                Ok(digests) => copied.push((package.clone(), digests)),
                Err(CopyFailure::Package(problem)) => {
                    if dest.exists() {
                        std::fs::remove_dir_all(&dest).map_err(write(&dest))?;
                    }
                    scanned.package = Err(problem);
                }
                Err(CopyFailure::Write(path, source)) => return Err(StageError::Write { dir: path, source }),
            }
        }
        let name = self.generation_name(&content_fingerprint(&copied));
        let target = self.dir().join(&name);
        if !target.is_dir() {
            // Readable by the runtime (same user); the temporary folder starts private.
            std::fs::set_permissions(staging.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755)).map_err(write(staging.path()))?;
            std::fs::rename(staging.path(), &target).map_err(write(&target))?;
        }
        Ok(name)
    }

    /// Point the link at `generation` in one rename(2): a reader sees the old or the new, never none.
    fn point_link_at(&self, generation: &str) -> Result<(), StageError> {
        let swap = |source| StageError::Swap { link: self.link.clone(), source };
        // Earlier versions staged into a plain folder at the link's path.
        if self.link.symlink_metadata().is_ok_and(|m| m.is_dir()) {
            std::fs::remove_dir_all(&self.link).map_err(swap)?;
        }
        let fresh = self.dir().join(format!("{LINK_PREFIX}{}", uuid::Uuid::new_v4().simple()));
        std::os::unix::fs::symlink(generation, &fresh).map_err(swap)?;
        std::fs::rename(&fresh, &self.link).map_err(|e| {
            let _ = std::fs::remove_file(&fresh);
            swap(e)
        })
    }

    /// Remove generations other than `current` and `previous`, and leftovers of interrupted work.
    fn remove_old(&self, current: &str, previous: Option<&str>) {
        let Ok(entries) = std::fs::read_dir(self.dir()) else { return };
        let generation_prefix = format!("{}.", self.link_name());
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().to_string();
            let old_generation = name.starts_with(&generation_prefix) && name != current && Some(name.as_str()) != previous;
            if !(old_generation || name.starts_with(STAGING_PREFIX) || name.starts_with(LINK_PREFIX)) {
                continue;
            }
            let path = entry.path();
            let removed = if path.symlink_metadata().is_ok_and(|m| m.is_dir()) { std::fs::remove_dir_all(&path) } else { std::fs::remove_file(&path) };
            if let Err(e) = removed {
                tracing::warn!(path = %path.display(), error = %e, "could not remove an old skills generation");
            }
        }
    }
}

/// SHA-256 over each package's name and its files' paths, lengths and digests, in order.
fn content_fingerprint(packages: &[(SkillPackage, Vec<FileDigest>)]) -> [u8; 32] {
    use std::os::unix::ffi::OsStrExt;
    let mut h = Sha256::new();
    for (package, digests) in packages {
        h.update(package.name.as_bytes());
        h.update((package.files.len() as u64).to_le_bytes());
        for (file, digest) in package.files.iter().zip(digests) {
            h.update(file.relative.as_os_str().as_bytes());
            h.update([0]);
            h.update(file.len.to_le_bytes());
            h.update(digest);
        }
    }
    h.finalize().into()
}

#[cfg(test)]
mod tests {
    use super::super::tests::{package, skill_md};
    use super::*;

    fn setup() -> (tempfile::TempDir, PathBuf, SkillStager) {
        let tmp = tempfile::tempdir().unwrap();
        let skills = tmp.path().join("skills");
        std::fs::create_dir_all(&skills).unwrap();
        let stager = SkillStager::new(&skills, tmp.path().join("runtime/skills"));
        (tmp, skills, stager)
    }

    fn staged_names(stager: &SkillStager) -> Vec<String> {
        let mut names: Vec<_> = std::fs::read_dir(stager.link()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        names.sort();
        names
    }

    fn generations(stager: &SkillStager) -> Vec<String> {
        let mut names: Vec<_> = std::fs::read_dir(stager.dir()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).filter(|n| n.starts_with("skills.")).collect();
        names.sort();
        names
    }

    #[test]
    fn valid_packages_are_staged_behind_the_link_and_a_bad_one_only_disables_itself() {
        let (_tmp, skills, stager) = setup();
        let alpha = package(&skills, "alpha", &skill_md("alpha"));
        std::fs::create_dir_all(alpha.join("assets")).unwrap();
        std::fs::write(alpha.join("assets/a.txt"), "asset").unwrap();
        package(&skills, "beta", "---\nname: beta\n---\nno description\n");
        package(&skills, "gamma", &skill_md("gamma"));
        std::os::unix::fs::symlink("/etc/hostname", skills.join("gamma/host")).unwrap();
        package(&skills, "zeta", &skill_md("zeta"));

        let report = stager.refresh().unwrap();
        assert!(report.restaged);
        assert_eq!(staged_names(&stager), ["alpha", "zeta"]);
        assert_eq!(std::fs::read_to_string(stager.link().join("alpha/assets/a.txt")).unwrap(), "asset");
        assert_eq!(std::fs::read_to_string(stager.link().join("zeta/SKILL.md")).unwrap(), skill_md("zeta"));
        let problems: Vec<_> = report.packages.iter().filter_map(|s| s.package.as_ref().err().map(|e| (s.folder.as_str(), e.to_string()))).collect();
        assert_eq!(problems, [
            ("beta", "The skill `beta` has no description; the agent uses it to decide when to load the skill.".to_string()),
            ("gamma", "The symbolic link host in the skill folder `gamma` leads outside the package.".to_string()),
        ]);
        assert!(std::fs::symlink_metadata(stager.link()).unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read_link(stager.link()).unwrap(), report.generation.file_name().unwrap(), "a relative link to the generation");

        // Fixing the bad one stages it too, in a new generation behind the same link.
        std::fs::write(skills.join("beta/SKILL.md"), skill_md("beta")).unwrap();
        let fixed = stager.refresh().unwrap();
        assert!(fixed.restaged);
        assert_ne!(fixed.generation, report.generation);
        assert_eq!(staged_names(&stager), ["alpha", "beta", "zeta"]);
    }

    #[test]
    fn unchanged_content_is_not_staged_again() {
        let (_tmp, skills, stager) = setup();
        package(&skills, "alpha", &skill_md("alpha"));
        let first = stager.refresh().unwrap();
        assert!(first.restaged);
        let second = stager.refresh().unwrap();
        assert!(!second.restaged);
        assert_eq!(second.generation, first.generation);

        // Rewritten with the same bytes (new times, same content): still the same generation.
        std::fs::write(skills.join("alpha/SKILL.md"), skill_md("alpha")).unwrap();
        let rewritten = stager.refresh().unwrap();
        assert!(!rewritten.restaged);
        // Another stager (a restarted Hearth) finds the generation already current.
        let restarted = SkillStager::new(&skills, stager.link()).refresh().unwrap();
        assert!(!restarted.restaged);
        assert_eq!(restarted.generation, first.generation);

        std::fs::write(skills.join("alpha/SKILL.md"), skill_md("alpha").replace("BODY", "NEW BODY")).unwrap();
        assert!(stager.refresh().unwrap().restaged);
    }

    #[test]
    fn the_previous_generation_stays_readable_and_older_ones_go() {
        let (_tmp, skills, stager) = setup();
        package(&skills, "alpha", &skill_md("alpha"));
        let g1 = stager.refresh().unwrap().generation;
        // A run resolved the link to the first generation and reads from it later.
        let open_run = std::fs::canonicalize(stager.link().join("alpha/SKILL.md")).unwrap();
        package(&skills, "beta", &skill_md("beta"));
        let g2 = stager.refresh().unwrap().generation;
        assert_eq!(std::fs::read_to_string(&open_run).unwrap(), skill_md("alpha"), "the previous generation is kept");
        assert_eq!(generations(&stager).len(), 2);
        package(&skills, "gamma", &skill_md("gamma"));
        let g3 = stager.refresh().unwrap().generation;
        assert!(!g1.exists(), "the generation before the previous one is removed");
        assert!(g2.is_dir() && g3.is_dir());
        assert_eq!(generations(&stager).len(), 2);
    }

    #[test]
    fn readers_never_see_a_missing_or_partial_folder_while_the_link_is_swapped() {
        let (_tmp, skills, stager) = setup();
        let versions = [skill_md("alpha"), skill_md("alpha").replace("BODY", "SECOND BODY")];
        package(&skills, "alpha", &versions[0]);
        std::fs::write(skills.join("alpha/data.txt"), "x".repeat(64 * 1024)).unwrap();
        stager.refresh().unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let reader = {
            let (link, stop, versions) = (stager.link().to_path_buf(), stop.clone(), versions.clone());
            std::thread::spawn(move || {
                let mut reads = 0u32;
                while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                    let text = std::fs::read_to_string(link.join("alpha/SKILL.md")).expect("the staged skill is always there");
                    assert!(versions.contains(&text), "a whole version: {text}");
                    assert_eq!(std::fs::metadata(link.join("alpha/data.txt")).unwrap().len(), 64 * 1024);
                    reads += 1;
                }
                reads
            })
        };
        let mut swaps = 0;
        for i in 0..40 {
            std::fs::write(skills.join("alpha/SKILL.md"), &versions[(i + 1) % 2]).unwrap();
            swaps += usize::from(stager.refresh().unwrap().restaged);
        }
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let reads = reader.join().unwrap();
        assert_eq!(swaps, 40);
        assert!(reads > 0);
    }

    #[test]
    fn a_folder_left_by_earlier_versions_becomes_the_link_and_leftovers_go() {
        let (_tmp, skills, stager) = setup();
        package(&skills, "alpha", &skill_md("alpha"));
        package(stager.link(), "stale", &skill_md("stale"));
        let leftover = stager.dir().join(format!("{STAGING_PREFIX}crashed"));
        std::fs::create_dir_all(&leftover).unwrap();
        stager.refresh().unwrap();
        assert_eq!(staged_names(&stager), ["alpha"]);
        assert!(!leftover.exists());
    }

    #[test]
    fn no_packages_still_give_the_runtime_an_empty_folder() {
        let (tmp, _skills, _) = setup();
        let stager = SkillStager::new(tmp.path().join("never-created"), tmp.path().join("runtime/skills"));
        let report = stager.refresh().unwrap();
        assert!(report.packages.is_empty());
        assert!(staged_names(&stager).is_empty());
    }
}
