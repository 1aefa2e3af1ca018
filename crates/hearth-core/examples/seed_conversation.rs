//! Seeds a data folder with one project and one conversation of N messages (half user, half replies
//! with Markdown and a tool call), for the UI render benchmark.
//! `cargo run -p hearth-core --example seed_conversation -- <data-dir> <project-dir> <messages> [word]`
//! (`word`, "Module" unless given, makes the replies' headings and names: two conversations seeded
//! with different words share no text). Seeding again adds another conversation to the project.

use hearth_core::runtime::Usage;
use hearth_core::store::secrets::SecretsBackend;
use hearth_core::store::{MessageStatus, Store, ToolCall, ToolCallStatus};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (data, project, count, word) = match args.as_slice() {
        [data, project, count] => (data, project, count, "Module"),
        [data, project, count, word] => (data, project, count, word.as_str()),
        _ => {
            eprintln!("usage: seed_conversation <data-dir> <project-dir> <messages> [word]");
            std::process::exit(2);
        }
    };
    let lower = word.to_lowercase();
    let count: usize = count.parse().expect("a message count");
    std::fs::create_dir_all(project).expect("project folder");
    std::fs::create_dir_all(data).expect("data folder");
    let store = Store::open_in_data_dir(std::path::Path::new(data), SecretsBackend::FileOnly).expect("store");
    let p = store.add_project(std::path::Path::new(project)).expect("project");
    let c = store.create_conversation(&p.id, &format!("Long conversation ({word})")).expect("conversation");
    for i in 0..count / 2 {
        let u = store.add_user_message(&c.id, &format!("Question {i}: what does `{lower}_{i}` do?"), vec![]).expect("user message");
        store.set_status(&u.id, MessageStatus::Sending).unwrap();
        store.set_status(&u.id, MessageStatus::Done).unwrap();
        let r = store.begin_assistant_message(&c.id).expect("reply");
        store
            .upsert_tool_call(&r.id, &ToolCall { call_id: format!("c{i}"), tool: "read".into(), input: serde_json::json!({ "filePath": format!("src/{lower}_{i}.rs") }), output: Some("fn main() {}".into()), error: None, status: ToolCallStatus::Done })
            .unwrap();
        store.append_text(&r.id, &format!("## {word} {i}\n\nIt **parses** the input and returns a `Result`:\n\n```rust\nfn parse_{lower}_{i}(s: &str) -> Result<u32, String> {{ s.parse().map_err(|e| format!(\"{{e}}\")) }}\n```\n")).unwrap();
        store.set_usage(&r.id, &Usage { input_tokens: 1000 + i as u64, output_tokens: 50, reasoning_tokens: 0, cache_read_tokens: 0 }).unwrap();
        store.finish(&r.id, MessageStatus::Done, None).unwrap();
    }
    store.flush_pending().unwrap();
    println!("{}", c.id);
}
