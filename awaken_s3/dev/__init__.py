"""``awaken-s3 dev``: the whole service on one machine, for a developer to talk to.

The HTTP API handler served on 127.0.0.1 (each request turned into an API Gateway HTTP API
event), the worker run by the local SQS event source in killable containers, the sweeper on a
timer, all on an embedded moto server (or the AWS botocore finds), and a web console.
"""
