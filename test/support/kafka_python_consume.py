#!/usr/bin/env python3
"""Consumes seeded records through a secure_front with kafka-python (Debian's python3-kafka 2.0.2),
as a group member, and commits. Used by test/integration/test_security_front.cpp.

usage: kafka_python_consume.py BOOTSTRAP CAFILE MECHANISM USER PASSWORD TOPIC GROUP COUNT

Prints "consumed=N bad=B committed=C" on stdout (C: the sum of the committed offsets) and exits
0 once COUNT records were consumed and committed; exits 1 with the reason on stderr otherwise
(including a failed authentication), within about 30 seconds.
"""
import logging
import sys
import time


def main():
    bootstrap, cafile, mechanism, user, password, topic, group, count = sys.argv[1:9]
    count = int(count)
    logging.basicConfig(level=logging.ERROR, stream=sys.stderr)
    try:
        import kafka
        from kafka import KafkaConsumer, TopicPartition
    except ImportError as e:
        print("no kafka module: %s" % e, file=sys.stderr)
        return 3
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap.split(","),
        group_id=group,
        client_id="kafka-python-front-test",
        security_protocol="SASL_SSL",
        ssl_cafile=cafile,
        sasl_mechanism=mechanism,
        sasl_plain_username=user,
        sasl_plain_password=password,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
        request_timeout_ms=10000,
        api_version_auto_timeout_ms=10000,
    )
    consumer.subscribe([topic])
    consumed = 0
    bad = 0
    deadline = time.monotonic() + 30
    while consumed < count and time.monotonic() < deadline:
        for _tp, records in consumer.poll(timeout_ms=200).items():
            for r in records:
                key = r.key.decode() if r.key is not None else ""
                value = r.value.decode() if r.value is not None else ""
                # mock_cluster's scheme: the value starts with "<key>:"
                if not value.startswith(key + ":"):
                    bad += 1
                consumed += 1
    if consumed < count:
        print("consumed only %d of %d records" % (consumed, count), file=sys.stderr)
        consumer.close(autocommit=False)
        return 1
    consumer.commit()
    partitions = consumer.partitions_for_topic(topic) or set()
    committed = sum(consumer.committed(TopicPartition(topic, p)) or 0 for p in partitions)
    consumer.close(autocommit=False)
    print("consumed=%d bad=%d committed=%d" % (consumed, bad, committed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
