"""Where files live: local paths, or objects in S3-compatible object storage named by ``s3://`` URLs."""
