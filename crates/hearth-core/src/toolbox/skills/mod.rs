//! Skill packages: folders holding a `SKILL.md` whose YAML frontmatter names the skill (the
//! folder's name) and describes it. Each package is checked on its own: a bad one is reported with
//! a sentence and left out, the others stay usable. The valid ones are staged into a generation
//! folder that the runtime reads through one constant link ([`SkillStager`]); [`SkillStager::add`]
//! brings a folder in.

mod add;
mod stage;
mod tree;

use std::path::{Path, PathBuf};

pub use add::AddSkillError;
pub use stage::{SkillStager, StageError, StageReport};

/// The file that makes a folder a skill package.
pub const SKILL_FILE: &str = "SKILL.md";
/// Longest skill name (the Agent Skills format's bound).
pub const MAX_SKILL_NAME_CHARS: usize = 64;
/// Longest description.
pub const MAX_DESCRIPTION_CHARS: usize = 1024;
/// Largest SKILL.md: it is read whole, and its body goes to the model when the skill loads.
pub const MAX_SKILL_FILE_BYTES: u64 = 256 * 1024;
/// Largest single file of a package.
pub const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;
/// Largest package (all files), in bytes.
pub const MAX_PACKAGE_BYTES: u64 = 8 * 1024 * 1024;
/// Most files in one package.
pub const MAX_PACKAGE_FILES: usize = 256;
/// Deepest folder nesting inside a package.
pub const MAX_PACKAGE_DEPTH: usize = 8;
/// Most packages staged: the rest are reported, not staged, so each check's work stays bounded.
pub const MAX_SKILLS: usize = 100;
/// Skills the runtime has built in; a package of the same name would silently replace one.
pub const RESERVED_SKILL_NAMES: &[&str] = &["customize-opencode"];

const MIB: u64 = 1024 * 1024;

/// A checked package: every file it holds is within the bounds, and links stay inside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillPackage {
    pub name: String,
    pub description: String,
    /// The package folder.
    pub dir: PathBuf,
    /// Its files, sorted, relative to `dir`.
    pub files: Vec<PackageFile>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackageFile {
    pub relative: PathBuf,
    pub len: u64,
}

/// One folder of a skills folder: the package, or why it cannot be used.
#[derive(Debug)]
pub struct Scanned {
    /// The folder's name.
    pub folder: String,
    pub dir: PathBuf,
    pub package: Result<SkillPackage, SkillError>,
}

/// Why a package (or the folder holding them) cannot be used. The Display is the sentence the
/// Tools view shows.
#[derive(Debug, thiserror::Error)]
pub enum SkillError {
    #[error("Hearth could not read the skills folder {dir}: {source}")]
    FolderUnreadable { dir: PathBuf, source: std::io::Error },
    #[error("The folder `{folder}` has no SKILL.md, so it is not a skill package.")]
    NoSkillFile { folder: String },
    #[error("{file} in the skill folder `{folder}` could not be read: {source}")]
    Unreadable { folder: String, file: PathBuf, source: std::io::Error },
    #[error("SKILL.md in `{folder}` does not start with a frontmatter block between `---` lines.")]
    NoFrontmatter { folder: String },
    #[error("The frontmatter of SKILL.md in `{folder}` is not valid YAML: {source}.")]
    BadYaml { folder: String, source: yaml_rust2::ScanError },
    #[error("The frontmatter of SKILL.md in `{folder}` must be `key: value` lines.")]
    NotAMapping { folder: String },
    #[error("SKILL.md in `{folder}` has no `name` in its frontmatter.")]
    NoName { folder: String },
    #[error("The `{key}` in the frontmatter of SKILL.md in `{folder}` must be text.")]
    NotText { folder: String, key: &'static str },
    #[error("The skill is named `{name}` but its folder is `{folder}`; they must be the same.")]
    NameMismatch { name: String, folder: String },
    #[error("The skill name `{0}` must be lowercase letters, digits and hyphens, at most {MAX_SKILL_NAME_CHARS} characters.")]
    BadName(String),
    #[error("The skill name `{0}` is taken by a skill built into the runtime; rename the folder and its `name`.")]
    ReservedName(String),
    #[error("The skill `{0}` has no description; the agent uses it to decide when to load the skill.")]
    NoDescription(String),
    #[error("The skill `{0}` has a description longer than {MAX_DESCRIPTION_CHARS} characters.")]
    LongDescription(String),
    #[error("The skill folder `{folder}` holds more than {MAX_PACKAGE_FILES} files.")]
    TooManyFiles { folder: String },
    #[error("The skill folder `{folder}` holds more than {} MiB.", MAX_PACKAGE_BYTES / MIB)]
    TooLarge { folder: String },
    #[error("{file} in the skill folder `{folder}` is larger than {} MiB.", MAX_FILE_BYTES / MIB)]
    FileTooLarge { folder: String, file: PathBuf },
    #[error("SKILL.md in `{folder}` is larger than {} KiB; the agent reads it whole.", MAX_SKILL_FILE_BYTES / 1024)]
    SkillFileTooLarge { folder: String },
    #[error("The skill folder `{folder}` nests folders more than {MAX_PACKAGE_DEPTH} deep ({dir}).")]
    TooDeep { folder: String, dir: PathBuf },
    #[error("The symbolic link {link} in the skill folder `{folder}` leads outside the package.")]
    LinkOutside { folder: String, link: PathBuf },
    #[error("The symbolic link {link} in the skill folder `{folder}` leads nowhere.")]
    BrokenLink { folder: String, link: PathBuf },
    #[error("The symbolic link {link} in the skill folder `{folder}` loops back into its own folder.")]
    LinkLoop { folder: String, link: PathBuf },
    #[error("{file} in the skill folder `{folder}` is not a plain file or folder.")]
    SpecialFile { folder: String, file: PathBuf },
    #[error("The skill folder `{folder}` holds a second SKILL.md ({file}); a package holds one skill.")]
    NestedSkill { folder: String, file: PathBuf },
    #[error("{file} in the skill folder `{folder}` changed while Hearth copied it; it is tried again on the next check.")]
    Changed { folder: String, file: PathBuf },
    #[error("The skill folder `{folder}` is left out: Hearth uses at most {MAX_SKILLS} skills.")]
    TooManySkills { folder: String },
}

/// The name and description of a SKILL.md frontmatter, as the runtime reads it (a `---` block of
/// YAML at the very start).
fn frontmatter(text: &str, folder: &str) -> Result<(Option<String>, Option<String>), SkillError> {
    let mut lines = text.trim_start_matches('\u{feff}').split_inclusive('\n');
    let no_block = || SkillError::NoFrontmatter { folder: folder.into() };
    if lines.next().map(str::trim_end) != Some("---") {
        return Err(no_block());
    }
    let mut yaml = String::new();
    loop {
        let line = lines.next().ok_or_else(no_block)?;
        if line.trim_end() == "---" {
            break;
        }
        yaml.push_str(line);
    }
    let docs = yaml_rust2::YamlLoader::load_from_str(&yaml).map_err(|source| SkillError::BadYaml { folder: folder.into(), source })?;
    let Some(doc) = docs.into_iter().next() else { return Ok((None, None)) };
    let yaml_rust2::Yaml::Hash(map) = doc else { return Err(SkillError::NotAMapping { folder: folder.into() }) };
    let text_of = |key: &'static str| match map.get(&yaml_rust2::Yaml::String(key.into())) {
        None | Some(yaml_rust2::Yaml::Null) => Ok(None),
        Some(yaml_rust2::Yaml::String(s)) => Ok(Some(s.trim().to_string())),
        Some(_) => Err(SkillError::NotText { folder: folder.into(), key }),
    };
    Ok((text_of("name")?, text_of("description")?))
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_SKILL_NAME_CHARS
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

fn folder_name(dir: &Path) -> String {
    dir.file_name().map(|f| f.to_string_lossy().to_string()).unwrap_or_default()
}

/// Read and check one package folder: its SKILL.md, then every file against the bounds.
pub fn load(dir: &Path) -> Result<SkillPackage, SkillError> {
    let folder = folder_name(dir);
    if !dir.join(SKILL_FILE).is_file() {
        return Err(SkillError::NoSkillFile { folder });
    }
    let files = tree::inventory(dir, &folder)?;
    let bytes = tree::read_whole(&dir.join(SKILL_FILE), MAX_SKILL_FILE_BYTES)
        .map_err(|source| SkillError::Unreadable { folder: folder.clone(), file: SKILL_FILE.into(), source })?;
    let text = String::from_utf8_lossy(&bytes);
    let (name, description) = frontmatter(&text, &folder)?;
    let name = name.filter(|n| !n.is_empty()).ok_or_else(|| SkillError::NoName { folder: folder.clone() })?;
    if !valid_name(&name) {
        return Err(SkillError::BadName(name));
    }
    if folder != name {
        return Err(SkillError::NameMismatch { name, folder });
    }
    if RESERVED_SKILL_NAMES.contains(&name.as_str()) {
        return Err(SkillError::ReservedName(name));
    }
    let description = description.filter(|d| !d.is_empty()).ok_or_else(|| SkillError::NoDescription(name.clone()))?;
    if description.chars().count() > MAX_DESCRIPTION_CHARS {
        return Err(SkillError::LongDescription(name));
    }
    Ok(SkillPackage { name, description, dir: dir.into(), files })
}

/// Every package folder in `dir`, sorted, each checked on its own. Hidden entries are Hearth's
/// own work in progress (and never valid names); a missing folder holds no packages.
pub fn scan(dir: &Path) -> Result<Vec<Scanned>, SkillError> {
    let unreadable = |source| SkillError::FolderUnreadable { dir: dir.into(), source };
    let entries = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
        Err(e) => return Err(unreadable(e)),
    };
    let mut folders = Vec::new();
    for entry in entries {
        let path = entry.map_err(unreadable)?.path();
        if path.is_dir() && !folder_name(&path).starts_with('.') {
            folders.push(path);
        }
    }
    folders.sort();
    Ok(folders
        .into_iter()
        .enumerate()
        .map(|(i, dir)| {
            let folder = folder_name(&dir);
            let package = if i < MAX_SKILLS { load(&dir) } else { Err(SkillError::TooManySkills { folder: folder.clone() }) };
            Scanned { folder, dir, package }
        })
        .collect())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub fn package(root: &Path, folder: &str, text: &str) -> PathBuf {
        let dir = root.join(folder);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(SKILL_FILE), text).unwrap();
        dir
    }

    pub fn skill_md(name: &str) -> String {
        format!("---\nname: {name}\ndescription: The {name} skill.\n---\nBODY_OF_{name}\n")
    }

    fn problem(root: &Path, folder: &str) -> String {
        load(&root.join(folder)).unwrap_err().to_string()
    }

    #[test]
    fn the_fixture_skill_is_valid() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/skills");
        let found: Vec<_> = scan(&dir).unwrap().into_iter().map(|s| s.package).collect::<Result<_, _>>().unwrap();
        let web = found.iter().find(|p| p.name == "web-3d-game").expect("web-3d-game skill");
        assert!(!web.description.is_empty());
        assert_eq!(web.files, vec![PackageFile { relative: SKILL_FILE.into(), len: std::fs::metadata(web.dir.join(SKILL_FILE)).unwrap().len() }]);
    }

    #[test]
    fn frontmatter_problems_are_sentences() {
        let tmp = tempfile::tempdir().unwrap();
        let r = tmp.path();
        package(r, "good", "---\nname: good\ndescription: \"Does good things.\"\n---\nBody\n");
        package(r, "mismatch", "---\nname: other\ndescription: x\n---\n");
        package(r, "nodesc", "---\nname: nodesc\n---\n");
        package(r, "nofm", "# Just a title\n");
        package(r, "unclosed", "---\nname: unclosed\ndescription: x\n");
        package(r, "Bad_Name", "---\nname: Bad_Name\ndescription: x\n---\n");
        package(r, "badyaml", "---\nname: badyaml\ndescription: Use when: the user asks\n---\n");
        package(r, "listname", "---\nname: [a, b]\ndescription: x\n---\n");
        package(r, "scalar", "---\njust text\n---\n");
        package(r, "customize-opencode", "---\nname: customize-opencode\ndescription: x\n---\n");
        std::fs::create_dir_all(r.join("empty")).unwrap();
        assert_eq!(load(&r.join("good")).unwrap().description, "Does good things.");
        assert!(problem(r, "Bad_Name").contains("must be lowercase"));
        assert_eq!(problem(r, "empty"), "The folder `empty` has no SKILL.md, so it is not a skill package.");
        assert_eq!(problem(r, "mismatch"), "The skill is named `other` but its folder is `mismatch`; they must be the same.");
        assert!(problem(r, "nodesc").contains("no description"));
        assert!(problem(r, "nofm").contains("does not start with a frontmatter block"));
        assert!(problem(r, "unclosed").contains("does not start with a frontmatter block"));
        assert!(problem(r, "badyaml").starts_with("The frontmatter of SKILL.md in `badyaml` is not valid YAML: "), "{}", problem(r, "badyaml"));
        assert!(problem(r, "listname").contains("The `name` in the frontmatter of SKILL.md in `listname` must be text."));
        assert!(problem(r, "scalar").contains("must be `key: value` lines"));
        assert!(problem(r, "customize-opencode").contains("taken by a skill built into the runtime"));
    }

    #[test]
    fn yaml_forms_the_runtime_accepts_are_accepted() {
        let tmp = tempfile::tempdir().unwrap();
        let text = "\u{feff}---\r\nname: 'folded'\r\ndescription: >\r\n  Long text\r\n  on two lines.\r\nlicense: MIT\r\nmetadata:\r\n  version: 2\r\n---\r\nBody\r\n";
        let p = load(&package(tmp.path(), "folded", text)).unwrap();
        assert_eq!((p.name.as_str(), p.description.as_str()), ("folded", "Long text on two lines."));
    }

    #[test]
    fn a_scan_reports_each_folder_on_its_own_and_skips_hidden_work() {
        let tmp = tempfile::tempdir().unwrap();
        let r = tmp.path();
        package(r, "alpha", &skill_md("alpha"));
        package(r, "broken", "no frontmatter");
        package(r, "zeta", &skill_md("zeta"));
        package(r, ".incoming-x", &skill_md("half-copied"));
        std::fs::write(r.join("notes.txt"), "not a package").unwrap();
        let scanned = scan(r).unwrap();
        let folders: Vec<_> = scanned.iter().map(|s| (s.folder.as_str(), s.package.is_ok())).collect();
        assert_eq!(folders, [("alpha", true), ("broken", false), ("zeta", true)]);
        assert!(scan(&r.join("missing")).unwrap().is_empty(), "no skills folder yet: no packages");
    }

    #[test]
    fn past_the_skill_count_bound_packages_are_reported_not_loaded() {
        let tmp = tempfile::tempdir().unwrap();
        for i in 0..=MAX_SKILLS {
            package(tmp.path(), &format!("s{i:03}"), &skill_md(&format!("s{i:03}")));
        }
        let scanned = scan(tmp.path()).unwrap();
        assert_eq!(scanned.iter().filter(|s| s.package.is_ok()).count(), MAX_SKILLS);
        let last = scanned.last().unwrap().package.as_ref().unwrap_err().to_string();
        assert_eq!(last, format!("The skill folder `s{MAX_SKILLS:03}` is left out: Hearth uses at most {MAX_SKILLS} skills."));
    }
}
