//! The one merge of the configuration's projects with the datastore's
//! (`ProjectDirectory`): what the verifiers, the console, the jobs and the CLI see.

// Tests assert by panicking.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use wisp_proto::model;
use wisp_store::collection::Collection;
use wisp_store::projects::{ProjectDirectory, ProjectSource, config_project};
use wisp_store_embedded::SqliteDatastore;

fn stored(id: &str, desc: &str) -> model::Project {
    model::Project {
        id: id.into(),
        desc: desc.into(),
        static_admin: Some(model::ProjectStaticUser {
            username: "stored-admin".into(),
            password_hash: "$2a$10$not-a-real-hash".into(),
        }),
        ..Default::default()
    }
}

#[tokio::test]
async fn the_config_files_projects_over_the_datastores() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ds = Arc::new(SqliteDatastore::open(dir.path().join("wisp.db")).expect("open"));
    let projects: Collection<model::Project> = Collection::new(ds);
    projects
        .create(stored("b-stored", "in the datastore"))
        .await
        .expect("create");
    // The config file defines one the datastore also holds: the config file's wins.
    projects
        .create(stored("c-both", "shadowed"))
        .await
        .expect("create");
    let directory = ProjectDirectory::new(
        projects,
        [
            config_project("a-config", "from the file", "admin", "hash"),
            config_project("c-both", "from the file", "admin", "hash"),
        ],
    );

    let (a, source) = directory
        .find("a-config")
        .await
        .expect("find")
        .expect("found");
    assert_eq!(
        (a.desc.as_str(), source),
        ("from the file", ProjectSource::Config)
    );
    let (b, source) = directory
        .find("b-stored")
        .await
        .expect("find")
        .expect("found");
    assert_eq!(
        (b.desc.as_str(), source),
        ("in the datastore", ProjectSource::Datastore)
    );
    let (c, source) = directory
        .find("c-both")
        .await
        .expect("find")
        .expect("found");
    assert_eq!(
        (c.desc.as_str(), source),
        ("from the file", ProjectSource::Config)
    );
    assert!(directory.find("nowhere").await.expect("find").is_none());
    assert!(directory.exists("a-config").await.expect("exists"));
    assert!(directory.exists("b-stored").await.expect("exists"));
    assert!(!directory.exists("nowhere").await.expect("exists"));
    assert!(directory.is_config_project("c-both"));
    assert!(!directory.is_config_project("b-stored"));

    assert_eq!(
        directory.ids().await.expect("ids"),
        ["a-config", "b-stored", "c-both"]
    );
    let listed: Vec<(String, ProjectSource)> = directory
        .list()
        .await
        .expect("list")
        .into_iter()
        .map(|(p, s)| (p.id, s))
        .collect();
    assert_eq!(
        listed,
        [
            ("a-config".to_string(), ProjectSource::Config),
            ("b-stored".to_string(), ProjectSource::Datastore),
            ("c-both".to_string(), ProjectSource::Config),
            ("c-both".to_string(), ProjectSource::Datastore),
        ]
    );

    // Callers that know only the ids (the verifiers, the jobs) see the same set.
    let by_ids = ProjectDirectory::with_config_ids(
        Collection::new(Arc::new(
            SqliteDatastore::open(dir.path().join("wisp.db")).expect("open"),
        )),
        ["a-config".to_string()],
    );
    assert_eq!(
        by_ids.ids().await.expect("ids"),
        ["a-config", "b-stored", "c-both"]
    );
}
