"""A small AMQP management client for tests: requests to $management, answers
on a temporary reply queue."""
from proton import Message
from proton.utils import BlockingConnection


class Mgmt:
    def __init__(self, url, timeout=10):
        self.conn = BlockingConnection(url, timeout=timeout, sasl_enabled=False)
        self.replies = self.conn.create_receiver(None, dynamic=True, credit=50)
        self.reply_to = self.replies.link.remote_source.address
        self.sender = self.conn.create_sender("$management")
        self.next_id = 0

    def request(self, properties, body=None, message_id=True, correlation_id=None, reply_to=True):
        """Sends one request; returns the reply Message."""
        self.next_id += 1
        msg = Message(properties=properties, body=body)
        if message_id:
            msg.id = "req-%d" % self.next_id
        if correlation_id is not None:
            msg.correlation_id = correlation_id
        if reply_to:
            msg.reply_to = self.reply_to
        self.sender.send(msg)
        reply = self.replies.receive(timeout=10)
        self.replies.accept()
        return reply

    def call(self, operation, type="org.amqp.management", name=None, body=None, **props):
        p = {"operation": operation, "type": type}
        if name is not None:
            p["name"] = name
        p.update(props)
        r = self.request(p, body)
        return r.properties["statusCode"], r.properties["statusDescription"], r.body

    def query(self, entity_type, attributes=(), **props):
        status, desc, body = self.call("QUERY", entityType=entity_type, body={"attributeNames": list(attributes)},
                                       **props)
        assert status == 200, (status, desc)
        return [dict(zip(body["attributeNames"], row)) for row in body["results"]]

    def close(self):
        self.conn.close()
