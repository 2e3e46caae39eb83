#!/usr/bin/env bash
# Install the system packages the project needs when they are missing (Debian/apt):
# Java 17 (the Kafka broker), Maven (fetches the broker jars), PostgreSQL (tests), Chromium (UI test).
set -euo pipefail
missing=()
command -v java >/dev/null || missing+=(openjdk-17-jre-headless)
command -v mvn >/dev/null || missing+=(maven)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
if [[ "${REBALANCE_ADVISOR_SKIP_BROWSER:-0}" != 1 ]]; then
  command -v chromium >/dev/null || missing+=(chromium)
  command -v chromedriver >/dev/null || missing+=(chromium-driver)
fi
if ((${#missing[@]})); then
  echo "installing system packages: ${missing[*]}"
  sudo_cmd=()
  [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # Debian starts a default PostgreSQL cluster on install; the tests run their own throwaway one.
  if [[ " ${missing[*]} " == *" postgresql "* ]] && command -v pg_ctlcluster >/dev/null; then
    "${sudo_cmd[@]}" pg_ctlcluster --force "$(ls /usr/lib/postgresql | sort -V | tail -1)" main stop 2>/dev/null || true
  fi
fi
