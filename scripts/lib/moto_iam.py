"""IAM on a moto_server that enforces it (scripts/moto.sh start-iam; moto's
INITIAL_NO_AUTH_ACTION_COUNT): the operator's credentials, and one IAM user per Lambda
function holding exactly the policy the tests derived (tests/e2e/support/iam.rs).

    python3 moto_iam.py operator ENDPOINT OUT.json
        While moto still lets requests through unsigned: creates user `wisp-operator`
        with every action on every resource (the operator runs `wisp aws init`,
        `wisp migrate`, ... as an administrator), writes its access key to OUT.json,
        then switches enforcement on (POST /moto-api/reset-auth 0).
    python3 moto_iam.py users ENDPOINT OPERATOR.json SPEC.json
        SPEC: {"<user>": {"policy": {...}, "managed": ["arn:...", ...]}}. Creates each
        user (or replaces its inline policy `wisp`) with the operator's credentials;
        prints {"<user>": {"access_key_id", "secret_access_key"}} (keys only for users
        it created).
    python3 moto_iam.py cache ENDPOINT OPERATOR.json CACHE_ID USER_ID
        As the operator, makes the deployment's ElastiCache cache as the IaC makes it with
        IAM auth (infra/terraform redis.tf, template.yaml): user USER_ID with IAM auth (its
        name equal to its id), a user group holding it, and replication group CACHE_ID
        with in-transit encryption and that user group. (moto serves no serverless
        caches.)
"""

import json
import sys
import urllib.request

import boto3

REGION = "us-east-1"
ADMIN = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}


def iam(endpoint, key=None):
    creds = {"aws_access_key_id": key["access_key_id"], "aws_secret_access_key": key["secret_access_key"]} if key else {
        "aws_access_key_id": "bootstrap", "aws_secret_access_key": "bootstrap"}
    return boto3.client("iam", endpoint_url=endpoint, region_name=REGION, **creds)


def access_key(client, user):
    k = client.create_access_key(UserName=user)["AccessKey"]
    return {"access_key_id": k["AccessKeyId"], "secret_access_key": k["SecretAccessKey"]}


def operator(endpoint, out):
    client = iam(endpoint)
    client.create_user(UserName="wisp-operator")
    client.put_user_policy(UserName="wisp-operator", PolicyName="admin", PolicyDocument=json.dumps(ADMIN))
    key = access_key(client, "wisp-operator")
    with open(out, "w") as f:
        json.dump(key, f)
    request = urllib.request.Request(f"{endpoint}/moto-api/reset-auth", data=b"0", method="POST",
                                     headers={"Content-Type": "text/plain"})
    urllib.request.urlopen(request, timeout=10).read()
    # Enforced from now on: an unsigned call must be refused.
    try:
        iam(endpoint).list_users()
    except client.exceptions.ClientError:
        return
    sys.exit("moto_iam: moto does not enforce IAM after reset-auth")


def users(endpoint, operator_file, spec_file):
    with open(operator_file) as f:
        client = iam(endpoint, json.load(f))
    with open(spec_file) as f:
        spec = json.load(f)
    out = {}
    existing = {u["UserName"] for page in client.get_paginator("list_users").paginate() for u in page["Users"]}
    for user, grants in spec.items():
        if user not in existing:
            client.create_user(UserName=user)
        client.put_user_policy(UserName=user, PolicyName="wisp", PolicyDocument=json.dumps(grants["policy"]))
        for arn in grants.get("managed", []):
            client.attach_user_policy(UserName=user, PolicyArn=arn)
        if user not in existing:
            out[user] = access_key(client, user)
    json.dump(out, sys.stdout)


def cache(endpoint, operator_file, cache_id, user_id):
    with open(operator_file) as f:
        key = json.load(f)
    client = boto3.client("elasticache", endpoint_url=endpoint, region_name=REGION,
                          aws_access_key_id=key["access_key_id"],
                          aws_secret_access_key=key["secret_access_key"])
    client.create_user(UserId=user_id, UserName=user_id, Engine="redis",
                       AccessString="on ~* -@all +ping +get +set +del +hset +hget +hgetall +hdel",
                       AuthenticationMode={"Type": "iam"})
    group = cache_id.removesuffix("-cache") + "-users"
    client.create_replication_group(
        ReplicationGroupId=cache_id, ReplicationGroupDescription="Wisp cache", Engine="redis",
        CacheNodeType="cache.t4g.micro", NumCacheClusters=1, TransitEncryptionEnabled=True,
        UserGroupIds=[group])


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == "operator":
        operator(sys.argv[2], sys.argv[3])
    elif len(sys.argv) >= 6 and sys.argv[1] == "cache":
        cache(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5])
    elif len(sys.argv) >= 5 and sys.argv[1] == "users":
        users(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
