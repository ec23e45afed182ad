"""``awaken-s3 init``: a new project of the user's own, built on awaken-s3.

:mod:`~awaken_s3.project.scaffold` holds its files (from ``skeleton/``) and writes them
without overwriting any; :mod:`~awaken_s3.project.stack` derives its template from awaken-s3's
own template.yaml (``template.yaml`` here is that file), so the two stacks are one. Used at
development time only: the Lambda artifacts leave this package out.
"""
