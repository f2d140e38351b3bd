#!/usr/bin/env bash
# TLS for real: a CA, a server certificate for the name relserve.test and a client
# certificate made with openssl; relserve with --tls-cert/--tls-key (TLS) and with
# --tls-client-ca (mutual TLS); relserve-client with and without the right credentials.
bin="$1"; root="$2"
source "$(dirname "$0")/client_test_lib.sh"
command -v openssl > /dev/null || { echo "openssl is needed (scripts/install-deps.sh installs it)"; exit 1; }

pki="$work/pki"
mkdir -p "$pki"
ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
# ca_sign NAME CA EXTENSIONS: a key and a certificate for NAME signed by CA.
ca_sign() {
  openssl req "${ec[@]}" -keyout "$pki/$1.key" -out "$pki/$1.csr" -subj "/CN=$1" 2>> "$pki/openssl.log"
  printf '%s\n' "$3" > "$pki/$1.ext"
  openssl x509 -req -in "$pki/$1.csr" -CA "$pki/$2.pem" -CAkey "$pki/$2.key" -CAcreateserial -days 2 \
    -extfile "$pki/$1.ext" -out "$pki/$1.pem" 2>> "$pki/openssl.log"
}
for ca in ca other-ca; do
  openssl req -x509 "${ec[@]}" -keyout "$pki/$ca.key" -out "$pki/$ca.pem" -subj "/CN=relserve test $ca" -days 2 \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign 2>> "$pki/openssl.log"
done
ca_sign server ca "subjectAltName=DNS:relserve.test
extendedKeyUsage=serverAuth"
ca_sign client ca "extendedKeyUsage=clientAuth"
ca_sign stranger other-ca "extendedKeyUsage=clientAuth"

make_model embedder --sentence-transformers

# Startup errors name the flag.
expect_exit 1 "$bin/relserve" --model "embedder=$work/embedder" --tls-cert "$pki/missing.pem" --tls-key "$pki/server.key"
grep -q -- "--tls-cert: cannot read" "$work/err" || { echo "FAILED: no --tls-cert error"; cat "$work/err"; exit 1; }
expect_exit 1 "$bin/relserve" --model "embedder=$work/embedder" --tls-cert "$pki/server.pem" --tls-key "$pki/server.pem"
grep -q -- "--tls-key" "$work/err" || { echo "FAILED: no --tls-key error"; cat "$work/err"; exit 1; }
expect_exit 2 "$bin/relserve" --model "embedder=$work/embedder" --tls-cert "$pki/server.pem"
grep -q -- "--tls-cert needs --tls-key" "$work/err" || { echo "FAILED: no pairing error"; cat "$work/err"; exit 1; }

# TLS.
start_server tls.log --model "embedder=$work/embedder" --metrics-port -1 \
  --tls-cert "$pki/server.pem" --tls-key "$pki/server.key"
grep -q "gRPC over TLS" "$work/tls.log"
t=(--target "127.0.0.1:$grpc_port" --deadline-ms 5000)
expect_exit 1 "$client" health "${t[@]}"                           # plaintext against TLS
expect_exit 1 "$client" models "${t[@]}"
check_json 'j["error"]["code"] == "UNAVAILABLE"' < "$work/err"
expect_exit 1 "$client" health "${t[@]}" --tls                      # the system's roots do not know our CA
expect_exit 1 "$client" health "${t[@]}" --ca-cert "$pki/ca.pem"     # 127.0.0.1 is not relserve.test
expect_exit 1 "$client" health "${t[@]}" --ca-cert "$pki/other-ca.pem" --tls-server-name relserve.test
expect_exit 0 "$client" health "${t[@]}" --ca-cert "$pki/ca.pem" --tls-server-name relserve.test
expect_exit 0 "$client" embed "${t[@]}" --ca-cert "$pki/ca.pem" --tls-server-name relserve.test "over TLS"
check_json 'len(j["embeddings"][0]["values"]) == 32' < "$work/out"
expect_exit 2 "$client" health "${t[@]}" --ca-cert "$pki/missing.pem"
check_json '"--ca-cert" in j["error"]["message"]' < "$work/err"

# Mutual TLS.
start_server mtls.log --model "embedder=$work/embedder" --metrics-port -1 \
  --tls-cert "$pki/server.pem" --tls-key "$pki/server.key" --tls-client-ca "$pki/ca.pem"
grep -q "mutual TLS" "$work/mtls.log"
m=(--target "127.0.0.1:$grpc_port" --deadline-ms 5000 --ca-cert "$pki/ca.pem" --tls-server-name relserve.test)
expect_exit 1 "$client" health "${m[@]}"                                                     # no client certificate
expect_exit 1 "$client" health "${m[@]}" --client-cert "$pki/stranger.pem" --client-key "$pki/stranger.key"
expect_exit 0 "$client" health "${m[@]}" --client-cert "$pki/client.pem" --client-key "$pki/client.key"
expect_exit 0 "$client" models "${m[@]}" --client-cert "$pki/client.pem" --client-key "$pki/client.key"
check_json '[x["name"] for x in j["models"]] == ["embedder"]' < "$work/out"
expect_exit 0 "$client" bench "${m[@]}" --client-cert "$pki/client.pem" --client-key "$pki/client.key" \
  --requests 10 --warmup 0 --concurrency 2 --lengths fixed:16 --quiet
check_json 'j["requests"] == 10' 'j["errors"] == {}' < "$work/out"
echo "relserve-client TLS: passed"
