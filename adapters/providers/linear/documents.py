"""Every GraphQL document the Linear provider sends: constants, so a test validates each one
against the schema the fake Linear serves (a subset of Linear's own), and no schema is fetched
at start.

Sizes are chosen under Linear's complexity limits (10,000 points a query, 250,000 an hour; a
connection multiplies its nodes' cost by ``first``, whatever it holds). A page of 50 issues with
20 relations each costs about 4,000 points (labels are read as ids and named from the team's
list), so a poll first asks whether anything changed at all (``CpeChanged``: one issue, a few
points) and lists the changes only when so.
"""

from __future__ import annotations

ISSUE_FIELDS = """
fragment CpeIssueFields on Issue {
  id
  identifier
  title
  description
  createdAt
  updatedAt
  archivedAt
  team { id }
  project { id name }
  state { id name type }
  creator { id email guest }
  labelIds
  inverseRelations(first: 20) {
    nodes { id type issue { id identifier state { type } } }
  }
}
"""

VIEWER = """
query CpeViewer {
  viewer { id name email guest }
}
"""

TEAM = """
query CpeTeam($key: String!) {
  teams(filter: { key: { eq: $key } }, first: 1) {
    nodes {
      id
      key
      name
      states(first: 50) { nodes { id name type position } }
      labels(first: 250) { nodes { id name } }
    }
  }
}
"""

TEAMS = """
query CpeTeams {
  teams(first: 50) { nodes { key name } }
}
"""

MEMBERS = """
query CpeTeamMembers($id: String!, $after: String) {
  team(id: $id) {
    members(first: 250, after: $after) {
      nodes { id email guest active }
      pageInfo { hasNextPage endCursor }
    }
  }
}
"""

ISSUES = (
    """
query CpeIssues($filter: IssueFilter, $first: Int, $after: String) {
  issues(filter: $filter, first: $first, after: $after, orderBy: updatedAt) {
    nodes { ...CpeIssueFields }
    pageInfo { hasNextPage endCursor }
  }
}
"""
    + ISSUE_FIELDS
)

CHANGED = """
query CpeChanged($filter: IssueFilter) {
  issues(filter: $filter, first: 1) { nodes { id } }
}
"""

ISSUE = (
    """
query CpeIssue($id: String!) {
  issue(id: $id) { ...CpeIssueFields }
}
"""
    + ISSUE_FIELDS
)

PROJECTS = """
query CpeProjects($name: String!) {
  projects(filter: { name: { eqIgnoreCase: $name } }, first: 2) { nodes { id name } }
}
"""

LABELS = """
query CpeLabels($ids: [ID!]) {
  issueLabels(filter: { id: { in: $ids } }, first: 50) { nodes { id name } }
}
"""

TEAM_LABELS = """
query CpeTeamLabels($id: String!) {
  team(id: $id) { labels(first: 250) { nodes { id name } } }
}
"""

HISTORY = """
query CpeIssueHistory($id: String!, $after: String) {
  issue(id: $id) {
    history(first: 50, after: $after) {
      nodes { id createdAt addedLabelIds actor { id email guest } }
      pageInfo { hasNextPage endCursor }
    }
  }
}
"""

COMMENT = """
query CpeComment($id: ID!) {
  comments(filter: { id: { eq: $id } }, first: 1) { nodes { id } }
}
"""

ISSUE_CREATE = (
    """
mutation CpeIssueCreate($input: IssueCreateInput!) {
  issueCreate(input: $input) { success issue { ...CpeIssueFields } }
}
"""
    + ISSUE_FIELDS
)

ISSUE_UPDATE = (
    """
mutation CpeIssueUpdate($id: String!, $input: IssueUpdateInput!) {
  issueUpdate(id: $id, input: $input) { success issue { ...CpeIssueFields } }
}
"""
    + ISSUE_FIELDS
)

RELATION_CREATE = """
mutation CpeRelationCreate($input: IssueRelationCreateInput!) {
  issueRelationCreate(input: $input) { success issueRelation { id } }
}
"""

COMMENT_CREATE = """
mutation CpeCommentCreate($input: CommentCreateInput!) {
  commentCreate(input: $input) { success comment { id } }
}
"""

LABEL_CREATE = """
mutation CpeLabelCreate($input: IssueLabelCreateInput!) {
  issueLabelCreate(input: $input) { success issueLabel { id name } }
}
"""

ALL: dict[str, str] = {
    "CpeViewer": VIEWER,
    "CpeTeam": TEAM,
    "CpeTeamMembers": MEMBERS,
    "CpeProjects": PROJECTS,
    "CpeTeamLabels": TEAM_LABELS,
    "CpeLabels": LABELS,
    "CpeIssues": ISSUES,
    "CpeChanged": CHANGED,
    "CpeIssue": ISSUE,
    "CpeIssueHistory": HISTORY,
    "CpeComment": COMMENT,
    "CpeIssueCreate": ISSUE_CREATE,
    "CpeIssueUpdate": ISSUE_UPDATE,
    "CpeRelationCreate": RELATION_CREATE,
    "CpeCommentCreate": COMMENT_CREATE,
    "CpeLabelCreate": LABEL_CREATE,
}
"""Every document, by its operation's name (the validation test walks them all)."""
