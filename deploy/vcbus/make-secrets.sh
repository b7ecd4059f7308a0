#!/bin/sh
# The per-installation Secrets of deploy/vcbus/, printed as YAML (docs/deploy.md):
#
#   deploy/vcbus/make-secrets.sh [--encryption] [NAMESPACE] | kubectl apply -f -
#
# - nats-users: a random password for each NATS user of deploy/vcbus/base/nats.yaml (auth.conf):
#   setup, bridge, decider, projector, scheduler, actuator, subscriber, admin;
# - nats-tls: a private CA (ca.crt) and the NATS servers' certificate and key (tls.crt, tls.key)
#   for the client port and the cluster routes (server and client auth), valid for the Service's
#   and every server's DNS names; the CA's own key is not kept anywhere;
# - with --encryption, nats-encryption: the key of JetStream's encryption at rest (encrypted/).
#
# Needs openssl. Keep the output out of version control: it holds every password in clear.
set -eu
encryption=""
if [ "${1:-}" = "--encryption" ]; then encryption=1; shift; fi
ns="${1:-vcbus-system}"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
b64() { base64 < "$1" | tr -d '\n'; }

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 3650 \
  -subj "/CN=vcbus NATS CA" -keyout "$dir/ca.key" -out "$dir/ca.crt" 2>/dev/null
sans="DNS:nats.$ns,DNS:nats.$ns.svc,DNS:nats.$ns.svc.cluster.local"
sans="$sans,DNS:*.nats.$ns,DNS:*.nats.$ns.svc,DNS:*.nats.$ns.svc.cluster.local,DNS:localhost"
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=nats.$ns" \
  -keyout "$dir/tls.key" -out "$dir/tls.csr" 2>/dev/null
printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\nbasicConstraints=CA:FALSE\n' "$sans" > "$dir/ext"
openssl x509 -req -in "$dir/tls.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial \
  -days 825 -sha256 -extfile "$dir/ext" -out "$dir/tls.crt" 2>/dev/null

cat <<YAML
apiVersion: v1
kind: Secret
metadata:
  name: nats-users
  namespace: $ns
  labels:
    app.kubernetes.io/part-of: vcbus
type: Opaque
stringData:
YAML
for user in setup bridge decider projector scheduler actuator subscriber admin; do
  echo "  $user: $(openssl rand -hex 24)"
done
cat <<YAML
---
apiVersion: v1
kind: Secret
metadata:
  name: nats-tls
  namespace: $ns
  labels:
    app.kubernetes.io/part-of: vcbus
type: kubernetes.io/tls
data:
  ca.crt: $(b64 "$dir/ca.crt")
  tls.crt: $(b64 "$dir/tls.crt")
  tls.key: $(b64 "$dir/tls.key")
YAML
if [ -n "$encryption" ]; then
cat <<YAML
---
apiVersion: v1
kind: Secret
metadata:
  name: nats-encryption
  namespace: $ns
  labels:
    app.kubernetes.io/part-of: vcbus
type: Opaque
stringData:
  key: $(openssl rand -hex 32)
YAML
fi
