//! Skill packages through the app against the REAL runtime and the built-in scripted model: a
//! valid package loads through the runtime's `skill` tool while a bad one sits beside it (shown
//! with its reason), and adding a skill while the runtime runs restages it without restarting the
//! runtime: same process, and a turn that was running when the link was swapped finishes with
//! its skill.

use crate::support;

use std::path::Path;
use std::sync::Arc;

use hearth_core::app::*;
use hearth_core::binaries::opencode::LocateInputs;
use hearth_core::scripted_model::HoldRule;
use hearth_core::store::MessageStatus;

use support::{app_options, Recorder, TURN_TIMEOUT};

fn write_package(root: &Path, name: &str, description: &str, body: &str) -> std::path::PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(dir.join("reference")).unwrap();
    std::fs::write(dir.join("SKILL.md"), format!("---\nname: {name}\ndescription: {description}\n---\n{body}\n")).unwrap();
    std::fs::write(dir.join("reference/notes.txt"), format!("notes of {name}")).unwrap();
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_valid_skill_loads_beside_a_bad_one_and_restaging_keeps_the_runtime() {
    if support::require_runtime().await.is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let sources = tmp.path().join("sources");
    let projects: Vec<_> = ["project-a", "project-b"].iter().map(|p| tmp.path().join(p)).collect();
    for p in &projects {
        std::fs::create_dir_all(p).unwrap();
    }
    let events = Arc::new(Recorder::default());
    let locate = LocateInputs { anchors: vec![support::workspace_root()], ..Default::default() };
    let hearth = Hearth::open(app_options(&data, locate), events.clone()).await.unwrap();

    // The user adds a good package; a folder with a link out of it is refused with a sentence.
    let good = write_package(&sources, "good-skill", "Use for the good task.", "GOOD_SKILL_CANARY");
    let added = hearth.add_skill(good.display().to_string(), false).await.unwrap();
    assert_eq!((added.name.as_str(), added.problem.as_deref()), ("good-skill", None));
    let leaky = write_package(&sources, "leaky-skill", "Leaks.", "LEAKY");
    std::os::unix::fs::symlink("/etc/passwd", leaky.join("passwd")).unwrap();
    let refused = hearth.add_skill(leaky.display().to_string(), false).await.unwrap_err();
    assert_eq!(refused.to_string(), "The symbolic link passwd in the skill folder `leaky-skill` leads outside the package.");
    // A bad package dropped straight into the skills folder sits beside the good one.
    std::fs::create_dir_all(data.join("skills/bad-skill")).unwrap();
    std::fs::write(data.join("skills/bad-skill/SKILL.md"), "---\nname: bad-skill\n---\nBAD_SKILL_CANARY\n").unwrap();
    let listed = hearth.list_skills().await.unwrap();
    let shown: Vec<_> = listed.iter().map(|s| (s.name.as_str(), s.problem.as_deref())).collect();
    assert_eq!(shown, [
        ("bad-skill", Some("The skill `bad-skill` has no description; the agent uses it to decide when to load the skill.")),
        ("good-skill", None),
    ]);

    // The good skill loads through the runtime's own skill tool; the bad one is not there.
    let project_a = hearth.store().add_project(&projects[0]).unwrap();
    let a1 = hearth.store().create_conversation(&project_a.id, "A1").unwrap();
    hearth.send_message(&a1.id, "use skill good-skill".into(), vec![]).await.unwrap();
    let reply = events.finished(&a1.id, 1).await;
    assert_eq!(reply.status, MessageStatus::Done, "{reply:?}");
    let call = &reply.tool_calls[0];
    assert_eq!(call.tool, "skill");
    let loaded = call.output.clone().unwrap_or_default();
    assert!(loaded.contains("GOOD_SKILL_CANARY"), "the skill's body reached the agent: {call:?}");
    assert!(loaded.contains("reference/notes.txt"), "its files are listed from the staged folder: {loaded}");
    hearth.send_message(&a1.id, "use skill bad-skill".into(), vec![]).await.unwrap();
    let bad = events.finished(&a1.id, 2).await;
    let bad_call = format!("{:?}", bad.tool_calls.first());
    assert!(bad_call.contains("not found") && !bad_call.contains("BAD_SKILL_CANARY"), "the bad package is not staged: {bad_call}");

    let runtimes = hearth.runtime_statuses();
    assert_eq!(runtimes.len(), 1);
    let (pid, key) = (runtimes[0].runtime.pid.expect("the runtime runs"), runtimes[0].key.clone());
    let first_generation = std::fs::read_link(data.join("runtime/skills")).unwrap();

    // A turn is in flight (held at the model) when a new skill is added and the link is swapped.
    let model = hearth.builtin_model().expect("the built-in model served the turns");
    let hold = model.hold(HoldRule::any().with_predicate(|r| r.last_user_text().contains("again") && r.tool_results_after_last_user().is_empty()));
    hearth.send_message(&a1.id, "use skill good-skill again".into(), vec![]).await.unwrap();
    assert!(hold.wait_until_held(1, TURN_TIMEOUT).await);
    let second = write_package(&sources, "second-skill", "Use for the second task.", "SECOND_SKILL_CANARY");
    hearth.add_skill(second.display().to_string(), false).await.unwrap();
    let second_generation = std::fs::read_link(data.join("runtime/skills")).unwrap();
    assert_ne!(second_generation, first_generation, "restaged into a new generation");
    assert!(data.join("runtime").join(&first_generation).join("good-skill/SKILL.md").is_file(), "the previous generation stays readable");
    hold.release();
    let during = events.finished(&a1.id, 3).await;
    assert_eq!(during.status, MessageStatus::Done, "{during:?}");
    assert!(during.tool_calls[0].output.as_deref().unwrap_or("").contains("GOOD_SKILL_CANARY"), "{during:?}");

    // A project opened now gets the new skill, from the same runtime process.
    let project_b = hearth.store().add_project(&projects[1]).unwrap();
    let b1 = hearth.store().create_conversation(&project_b.id, "B1").unwrap();
    hearth.open_project(&project_b.id).await.unwrap();
    hearth.send_message(&b1.id, "use skill second-skill".into(), vec![]).await.unwrap();
    let second_reply = events.finished(&b1.id, 1).await;
    assert!(second_reply.tool_calls[0].output.as_deref().unwrap_or("").contains("SECOND_SKILL_CANARY"), "{second_reply:?}");
    let after = hearth.runtime_statuses();
    assert_eq!(after.len(), 1, "no second runtime: {after:?}");
    assert_eq!((after[0].runtime.pid, &after[0].key, after[0].retired), (Some(pid), &key, false), "the same runtime process serves the restaged skills");

    hearth.shutdown().await;
    assert!(support::gone_within(pid, std::time::Duration::from_secs(10)).await, "the runtime ends with the app");
}
