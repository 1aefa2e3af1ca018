//! Bringing a package folder into the skills folder: checked as staging checks it, copied into a
//! hidden temporary folder beside the others and renamed into place, so the skills folder never
//! holds a half-copied package.

use std::path::{Path, PathBuf};

use super::tree::{self, CopyFailure};
use super::{load, SkillError, SkillPackage};

/// Hidden prefixes (never valid skill names, skipped by scans) of a copy in progress and of the
/// package being replaced.
const INCOMING_PREFIX: &str = ".incoming-";
const REPLACED_PREFIX: &str = ".replaced-";

/// Why a folder was not added. The Display is the sentence the Tools view shows.
#[derive(Debug, thiserror::Error)]
pub enum AddSkillError {
    #[error("Give the skill folder's full path (it starts with /): `{0}` is relative.")]
    RelativePath(PathBuf),
    #[error("{0} is not a folder; choose the folder that holds the skill's SKILL.md.")]
    NotAFolder(PathBuf),
    #[error(transparent)]
    Invalid(#[from] SkillError),
    #[error("{0} is already in Hearth's skills folder.")]
    AlreadyAdded(PathBuf),
    #[error("A skill named `{0}` is already added; replace it to use this folder's version.")]
    Exists(String),
    #[error("Hearth could not copy the skill `{name}`: {source}")]
    Copy { name: String, source: std::io::Error },
    #[error("Hearth could not replace the skill `{name}`: {source}")]
    Replace { name: String, source: std::io::Error },
}

pub(super) fn add_package(folder: &Path, skills_dir: &Path, replace: bool) -> Result<SkillPackage, AddSkillError> {
    if !folder.is_absolute() {
        return Err(AddSkillError::RelativePath(folder.into()));
    }
    if !folder.is_dir() {
        return Err(AddSkillError::NotAFolder(folder.into()));
    }
    let package = load(folder)?;
    let name = package.name.clone();
    let copy_err = |source| AddSkillError::Copy { name: name.clone(), source };
    std::fs::create_dir_all(skills_dir).map_err(copy_err)?;
    if let (Ok(from), Ok(skills)) = (folder.canonicalize(), skills_dir.canonicalize()) {
        if from.starts_with(&skills) {
            return Err(AddSkillError::AlreadyAdded(folder.into()));
        }
    }
    let dest = skills_dir.join(&name);
    let exists = dest.symlink_metadata().is_ok();
    if exists && !replace {
        return Err(AddSkillError::Exists(name));
    }
    remove_leftovers(skills_dir);
    let incoming = tempfile::Builder::new().prefix(INCOMING_PREFIX).tempdir_in(skills_dir).map_err(copy_err)?;
    match tree::copy_package(&package, incoming.path()) {
        Ok(_) => {}
        Err(CopyFailure::Package(problem)) => return Err(problem.into()),
        Err(CopyFailure::Write(_, source)) => return Err(copy_err(source)),
    }
    std::fs::set_permissions(incoming.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755)).map_err(copy_err)?;
    if exists {
        let replace_err = |source| AddSkillError::Replace { name: name.clone(), source };
        let old = skills_dir.join(format!("{REPLACED_PREFIX}{}", uuid::Uuid::new_v4().simple()));
        std::fs::rename(&dest, &old).map_err(replace_err)?;
        if let Err(e) = std::fs::rename(incoming.path(), &dest) {
            let _ = std::fs::rename(&old, &dest);
            return Err(replace_err(e));
        }
        remove(&old);
    } else {
        std::fs::rename(incoming.path(), &dest).map_err(copy_err)?;
    }
    Ok(SkillPackage { dir: dest, ..package })
}

/// Copies and replacements an interrupted Hearth left behind.
fn remove_leftovers(skills_dir: &Path) {
    for entry in std::fs::read_dir(skills_dir).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        if name.starts_with(INCOMING_PREFIX) || name.starts_with(REPLACED_PREFIX) {
            remove(&entry.path());
        }
    }
}

fn remove(path: &Path) {
    if let Err(e) = std::fs::remove_dir_all(path) {
        tracing::warn!(path = %path.display(), error = %e, "could not remove a leftover skill folder");
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{package, skill_md};
    use super::super::{scan, SkillStager, MAX_PACKAGE_FILES};
    use super::*;

    fn setup() -> (tempfile::TempDir, PathBuf, SkillStager) {
        let tmp = tempfile::tempdir().unwrap();
        let skills = tmp.path().join("data/skills");
        let stager = SkillStager::new(&skills, tmp.path().join("data/runtime/skills"));
        (tmp, skills, stager)
    }

    #[test]
    fn a_package_is_copied_whole_and_an_existing_name_needs_replace() {
        let (tmp, skills, stager) = setup();
        let src = package(tmp.path(), "alpha", &skill_md("alpha"));
        std::fs::create_dir_all(src.join("assets")).unwrap();
        std::fs::write(src.join("assets/a.txt"), "v1").unwrap();
        let added = stager.add(&src, false).unwrap();
        assert_eq!(added.dir, skills.join("alpha"));
        assert_eq!(std::fs::read_to_string(skills.join("alpha/assets/a.txt")).unwrap(), "v1");

        std::fs::write(src.join("assets/a.txt"), "v2").unwrap();
        let again = stager.add(&src, false).unwrap_err();
        assert_eq!(again.to_string(), "A skill named `alpha` is already added; replace it to use this folder's version.");
        assert_eq!(std::fs::read_to_string(skills.join("alpha/assets/a.txt")).unwrap(), "v1", "refused: nothing changed");

        stager.add(&src, true).unwrap();
        assert_eq!(std::fs::read_to_string(skills.join("alpha/assets/a.txt")).unwrap(), "v2");
        let names: Vec<_> = std::fs::read_dir(&skills).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        assert_eq!(names, ["alpha"], "no temporary or replaced folder is left");
    }

    #[test]
    fn bad_folders_are_refused_with_a_sentence_and_leave_nothing_behind() {
        let (tmp, skills, stager) = setup();
        assert!(matches!(stager.add(Path::new("relative/alpha"), false), Err(AddSkillError::RelativePath(_))));
        let file = tmp.path().join("file.txt");
        std::fs::write(&file, "x").unwrap();
        assert_eq!(stager.add(&file, false).unwrap_err().to_string(), format!("{} is not a folder; choose the folder that holds the skill's SKILL.md.", file.display()));
        assert!(matches!(stager.add(&tmp.path().join("missing"), false), Err(AddSkillError::NotAFolder(_))));

        let outside = package(tmp.path(), "outside", &skill_md("outside"));
        std::os::unix::fs::symlink(&file, outside.join("leak.txt")).unwrap();
        assert_eq!(stager.add(&outside, false).unwrap_err().to_string(), "The symbolic link leak.txt in the skill folder `outside` leads outside the package.");

        let many = package(tmp.path(), "many", &skill_md("many"));
        for i in 0..MAX_PACKAGE_FILES {
            std::fs::write(many.join(format!("f{i}")), "x").unwrap();
        }
        assert!(matches!(stager.add(&many, false), Err(AddSkillError::Invalid(SkillError::TooManyFiles { .. }))));
        assert!(matches!(stager.add(&package(tmp.path(), "nodesc", "---\nname: nodesc\n---\n"), false), Err(AddSkillError::Invalid(SkillError::NoDescription(_)))));

        let added = stager.add(&package(tmp.path(), "alpha", &skill_md("alpha")), false).unwrap();
        assert!(matches!(stager.add(&added.dir, true), Err(AddSkillError::AlreadyAdded(_))), "a package never replaces itself");
        let scanned = scan(&skills).unwrap();
        assert_eq!(scanned.iter().map(|s| s.folder.as_str()).collect::<Vec<_>>(), ["alpha"]);
        assert_eq!(std::fs::read_dir(&skills).unwrap().count(), 1, "refused folders left no copy");
    }

    #[test]
    fn leftovers_of_an_interrupted_copy_are_removed_and_never_listed() {
        let (tmp, skills, stager) = setup();
        let half = skills.join(format!("{INCOMING_PREFIX}crashed"));
        std::fs::create_dir_all(&half).unwrap();
        std::fs::write(half.join("SKILL.md"), "half").unwrap();
        assert!(scan(&skills).unwrap().is_empty());
        stager.add(&package(tmp.path(), "alpha", &skill_md("alpha")), false).unwrap();
        assert!(!half.exists());
    }
}
