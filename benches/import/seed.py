#!/usr/bin/env python3
# Seeds an upstream-shaped control plane for the import benchmark: SQL for MariaDB on
# stdout (upstream's tables, rows as Go's encoding/json writes them) and a filestore
# directory in upstream's layout (one stage log per deployment).
#   python3 benches/import/seed.py DEPLOYMENTS BLOCKS_PER_LOG FILESTORE_DIR > seed.sql
import json, os, sys, uuid

deployments, blocks, files = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
project, pipeds, apps = "bench", 10, 100
here = os.path.dirname(os.path.abspath(__file__))

def row_id(u):
    b = uuid.UUID(u).bytes
    return (b[6:8] + b[4:6] + b[0:4] + b[8:16]).hex()

def sql_str(s):
    return "'" + s.replace("\\", "\\\\").replace("'", "''") + "'"

out = sys.stdout
out.write(open(os.path.join(here, "../../tests/fixtures/pipecd-mysql/schema.sql")).read())
out.write("SET autocommit=0;\n")

def insert(table, rows):
    for i in range(0, len(rows), 500):
        chunk = rows[i:i + 500]
        out.write(f"INSERT INTO {table} (Id, Data) VALUES " + ",".join(
            f"(UNHEX('{row_id(u)}'),{sql_str(json.dumps(d, separators=(',', ':')))})" for u, d in chunk) + ";\n")
    out.write("COMMIT;\n")

ns = uuid.UUID("6ba7b812-9dad-11d1-80b4-00c04fd430c8")
insert("Project", [(str(uuid.uuid5(ns, project)), {"id": project, "created_at": 1, "updated_at": 1, "_extra": project})])
piped_ids = [str(uuid.uuid4()) for _ in range(pipeds)]
insert("Piped", [(p, {"id": p, "name": f"piped-{i}", "project_id": project,
                      "keys": [{"hash": "$2a$10$" + "a" * 53, "created_at": 1}],
                      "created_at": 1, "updated_at": 1, "_extra": f"piped-{i}"}) for i, p in enumerate(piped_ids)])
app_ids = [str(uuid.uuid4()) for _ in range(apps)]
insert("Application", [(a, {"id": a, "name": f"app-{i}", "piped_id": piped_ids[i % pipeds], "project_id": project,
                            "git_path": {"repo": {"id": "repo", "branch": "main"}, "path": f"apps/{i}"},
                            "created_at": 1, "updated_at": 1, "_extra": f"app-{i}"}) for i, a in enumerate(app_ids)])
rows = []
for n in range(deployments):
    d = str(uuid.uuid4())
    app = n % apps
    rows.append((d, {"id": d, "application_id": app_ids[app], "application_name": f"app-{app}",
                     "piped_id": piped_ids[app % pipeds], "project_id": project,
                     "trigger": {"commit": {"hash": f"{n:08x}", "message": "deploy", "author": "bench", "branch": "main"},
                                 "commander": "bench", "timestamp": 1700000000 + n},
                     "summary": "Quick sync", "status": 4,
                     "stages": [{"id": "stage-0", "name": "K8S_SYNC", "visible": True, "status": 2}],
                     "completed_at": 1700000060 + n, "created_at": 1700000000 + n, "updated_at": 1700000060 + n,
                     "_extra": f"app-{app}"}))
    log = os.path.join(files, "log", d, "stage-0")
    os.makedirs(log, exist_ok=True)
    with open(os.path.join(log, "0.txt"), "w") as f:
        for b in range(blocks):
            f.write(json.dumps({"index": b + 1, "log": f"step {b + 1} of {blocks}: applied", "created_at": 1700000000 + n}) + "\n")
        f.write("EOL\n")
    if len(rows) == 5000:
        insert("Deployment", rows)
        rows = []
insert("Deployment", rows)
