"""Jira (Cloud REST v3, Data Center v2) as a work-item provider."""
