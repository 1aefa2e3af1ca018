//! Skill packages: folders holding a `SKILL.md` whose frontmatter names the skill (the folder's
//! name) and describes it. Valid packages are staged into one folder the runtime reads through
//! its `skills.paths` config (read when a project instance is created).

use std::path::{Path, PathBuf};

/// The file that makes a folder a skill package.
pub const SKILL_FILE: &str = "SKILL.md";
/// Longest skill name (the Agent Skills format's bound).
pub const MAX_SKILL_NAME_CHARS: usize = 64;
/// Longest description.
pub const MAX_DESCRIPTION_CHARS: usize = 1024;
/// Largest package staged (all files), in bytes.
pub const MAX_PACKAGE_BYTES: u64 = 8 * 1024 * 1024;
/// Most files in one package.
pub const MAX_PACKAGE_FILES: usize = 256;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillPackage {
    pub name: String,
    pub description: String,
    /// The package folder.
    pub dir: PathBuf,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SkillError {
    #[error("The skill folder {0} has no SKILL.md.")]
    NoSkillFile(PathBuf),
    #[error("SKILL.md in {0} could not be read: {1}")]
    Unreadable(PathBuf, String),
    #[error("SKILL.md in {0} does not start with a frontmatter block between `---` lines.")]
    NoFrontmatter(PathBuf),
    #[error("SKILL.md in {0} has no `name` in its frontmatter.")]
    NoName(PathBuf),
    #[error("The skill in {dir} is named `{name}` but its folder is `{folder}`; they must be the same.")]
    NameMismatch { dir: PathBuf, name: String, folder: String },
    #[error("The skill name `{0}` must be lowercase letters, digits and hyphens, at most {MAX_SKILL_NAME_CHARS} characters.")]
    BadName(String),
    #[error("The skill `{0}` has no description; the agent uses it to decide when to load the skill.")]
    NoDescription(String),
    #[error("The skill `{0}` has a description longer than {MAX_DESCRIPTION_CHARS} characters.")]
    LongDescription(String),
    #[error("The skill `{0}` is too large to stage (more than {MAX_PACKAGE_FILES} files or {MAX_PACKAGE_BYTES} bytes).")]
    TooLarge(String),
    #[error("Two skill packages are both named `{0}`.")]
    Duplicate(String),
    #[error("Hearth could not stage the skills in {0}: {1}")]
    Stage(PathBuf, String),
}

/// The `key: value` pairs of a `---` frontmatter block (values unquoted), or None without one.
fn frontmatter(text: &str) -> Option<Vec<(String, String)>> {
    let mut lines = text.trim_start_matches('\u{feff}').lines();
    if lines.next()?.trim() != "---" {
        return None;
    }
    let mut pairs = Vec::new();
    for line in lines {
        if line.trim() == "---" {
            return Some(pairs);
        }
        if let Some((k, v)) = line.split_once(':') {
            if !k.starts_with(char::is_whitespace) {
                let v = v.trim();
                let v = v.strip_prefix('"').and_then(|v| v.strip_suffix('"')).or_else(|| v.strip_prefix('\'').and_then(|v| v.strip_suffix('\''))).unwrap_or(v);
                pairs.push((k.trim().to_string(), v.to_string()));
            }
        }
    }
    None
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_SKILL_NAME_CHARS
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

/// Read and check one package folder.
pub fn load(dir: &Path) -> Result<SkillPackage, SkillError> {
    let file = dir.join(SKILL_FILE);
    if !file.is_file() {
        return Err(SkillError::NoSkillFile(dir.into()));
    }
    let text = std::fs::read_to_string(&file).map_err(|e| SkillError::Unreadable(dir.into(), e.to_string()))?;
    let fm = frontmatter(&text).ok_or_else(|| SkillError::NoFrontmatter(dir.into()))?;
    let get = |k: &str| fm.iter().find(|(key, _)| key == k).map(|(_, v)| v.trim().to_string());
    let name = get("name").filter(|n| !n.is_empty()).ok_or_else(|| SkillError::NoName(dir.into()))?;
    if !valid_name(&name) {
        return Err(SkillError::BadName(name));
    }
    let folder = dir.file_name().map(|f| f.to_string_lossy().to_string()).unwrap_or_default();
    if folder != name {
        return Err(SkillError::NameMismatch { dir: dir.into(), name, folder });
    }
    let description = get("description").filter(|d| !d.is_empty()).ok_or_else(|| SkillError::NoDescription(name.clone()))?;
    if description.chars().count() > MAX_DESCRIPTION_CHARS {
        return Err(SkillError::LongDescription(name));
    }
    Ok(SkillPackage { name, description, dir: dir.into() })
}

/// Every sub-folder of `dir` as a package or a sentence saying what is wrong, sorted by folder.
pub fn scan(dir: &Path) -> Vec<Result<SkillPackage, SkillError>> {
    let mut folders: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(rd) => rd.filter_map(|e| e.ok()).map(|e| e.path()).filter(|p| p.is_dir()).collect(),
        Err(e) => return vec![Err(SkillError::Unreadable(dir.into(), e.to_string()))],
    };
    folders.sort();
    folders.iter().map(|f| load(f)).collect()
}

/// Copy `packages` into `staging_dir/<name>/` (replacing what was staged before) and return
/// `staging_dir`, to pass in `skills.paths`. Copies, not links: the runtime's scan may not follow
/// links, and the user's folder may change while a runtime uses it.
pub fn stage(packages: &[SkillPackage], staging_dir: &Path) -> Result<PathBuf, SkillError> {
    let err = |e: std::io::Error| SkillError::Stage(staging_dir.into(), e.to_string());
    for (i, p) in packages.iter().enumerate() {
        if packages[..i].iter().any(|q| q.name == p.name) {
            return Err(SkillError::Duplicate(p.name.clone()));
        }
    }
    if staging_dir.exists() {
        std::fs::remove_dir_all(staging_dir).map_err(err)?;
    }
    std::fs::create_dir_all(staging_dir).map_err(err)?;
    for p in packages {
        let mut budget = (MAX_PACKAGE_FILES, MAX_PACKAGE_BYTES);
        copy_tree(&p.dir, &staging_dir.join(&p.name), &mut budget).map_err(|e| match e {
            CopyError::TooLarge => SkillError::TooLarge(p.name.clone()),
            CopyError::Io(e) => err(e),
        })?;
    }
    Ok(staging_dir.into())
}

enum CopyError {
    TooLarge,
    Io(std::io::Error),
}

impl From<std::io::Error> for CopyError {
    fn from(e: std::io::Error) -> Self {
        CopyError::Io(e)
    }
}

fn copy_tree(from: &Path, to: &Path, budget: &mut (usize, u64)) -> Result<(), CopyError> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            copy_tree(&entry.path(), &target, budget)?;
        } else if kind.is_file() {
            let len = entry.metadata()?.len();
            if budget.0 == 0 || len > budget.1 {
                return Err(CopyError::TooLarge);
            }
            budget.0 -= 1;
            budget.1 -= len;
            std::fs::copy(entry.path(), target)?;
        }
        // Links and special files are left out: a package is plain files.
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn package(root: &Path, folder: &str, text: &str) -> PathBuf {
        let dir = root.join(folder);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(SKILL_FILE), text).unwrap();
        dir
    }

    #[test]
    fn the_fixture_skill_is_valid() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/skills");
        let found: Vec<_> = scan(&dir).into_iter().collect::<Result<_, _>>().unwrap();
        let web = found.iter().find(|p| p.name == "web-3d-game").expect("web-3d-game skill");
        assert!(!web.description.is_empty());
        assert!(std::fs::read_to_string(web.dir.join(SKILL_FILE)).unwrap().contains("HEARTH_SKILL_WEB_3D_GAME"));
    }

    #[test]
    fn problems_are_sentences() {
        let tmp = tempfile::tempdir().unwrap();
        let r = tmp.path();
        package(r, "good", "---\nname: good\ndescription: \"Does good things.\"\n---\nBody\n");
        package(r, "mismatch", "---\nname: other\ndescription: x\n---\n");
        package(r, "nodesc", "---\nname: nodesc\n---\n");
        package(r, "nofm", "# Just a title\n");
        package(r, "Bad_Name", "---\nname: Bad_Name\ndescription: x\n---\n");
        std::fs::create_dir_all(r.join("empty")).unwrap();
        let all = scan(r);
        let msg = |i: usize| all[i].as_ref().unwrap_err().to_string();
        assert!(msg(0).contains("must be lowercase"), "{}", msg(0));
        assert!(msg(1).contains("has no SKILL.md"));
        assert_eq!(all[2].as_ref().unwrap().description, "Does good things.");
        assert!(msg(3).contains("named `other` but its folder is `mismatch`"));
        assert!(msg(4).contains("no description"));
        assert!(msg(5).contains("frontmatter"));
    }

    #[test]
    fn staging_copies_each_package_under_its_name() {
        let tmp = tempfile::tempdir().unwrap();
        let src = package(tmp.path(), "alpha", "---\nname: alpha\ndescription: A.\n---\nALPHA\n");
        std::fs::create_dir_all(src.join("assets")).unwrap();
        std::fs::write(src.join("assets/a.txt"), "asset").unwrap();
        let pkg = load(&src).unwrap();
        let staged = stage(std::slice::from_ref(&pkg), &tmp.path().join("staged")).unwrap();
        assert_eq!(std::fs::read_to_string(staged.join("alpha/SKILL.md")).unwrap(), "---\nname: alpha\ndescription: A.\n---\nALPHA\n");
        assert_eq!(std::fs::read_to_string(staged.join("alpha/assets/a.txt")).unwrap(), "asset");
        // Staging again replaces the old content; duplicates are refused.
        stage(&[], &staged).unwrap();
        assert!(!staged.join("alpha").exists());
        assert_eq!(stage(&[pkg.clone(), pkg], &staged), Err(SkillError::Duplicate("alpha".into())));
    }
}
