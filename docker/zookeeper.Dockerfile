# floodmark/zookeeper: the ZooKeeper machine. As for brokers, the harness starts the server
# process inside the running container (`docker exec`) so it can be signalled and restarted.
ARG BASE=floodmark/base
FROM ${BASE}

RUN if ! (command -v java && test -f /usr/share/java/zookeeper.jar && command -v iptables) >/dev/null 2>&1; then \
      apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        openjdk-17-jre-headless libzookeeper-java libslf4j-java iptables iproute2 procps \
      && rm -rf /var/lib/apt/lists/*; \
    fi

RUN mkdir -p /var/lib/floodmark/data
COPY zoo.cfg /etc/floodmark/zoo.cfg
WORKDIR /var/lib/floodmark
CMD ["sleep", "infinity"]
