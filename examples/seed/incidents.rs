//! `list_my_incidents` from the eve seed (4.4): per-user data keyed by the session's identity,
//! never by anything the model passes in.

use serde::Serialize;
use toolwright::prelude::*;

use super::signed_in_user;

#[derive(Debug, Serialize)]
struct Incident {
    id: &'static str,
    title: &'static str,
    severity: &'static str,
    service: &'static str,
    opened_at: &'static str,
    #[serde(skip)]
    assignee: &'static str,
    #[serde(skip)]
    open: bool,
}

const INCIDENTS: &[Incident] = &[
    Incident {
        id: "INC-2041",
        title: "Card payments time out for 4% of checkouts",
        severity: "sev1",
        service: "payment-api",
        opened_at: "2026-03-14T10:42:00Z",
        assignee: "u_ada",
        open: true,
    },
    Incident {
        id: "INC-2037",
        title: "Password reset emails not delivered",
        severity: "sev2",
        service: "notification-worker",
        opened_at: "2026-03-13T22:05:00Z",
        assignee: "u_ada",
        open: true,
    },
    Incident {
        id: "INC-2019",
        title: "Search results missing new products",
        severity: "sev3",
        service: "search-api",
        opened_at: "2026-03-11T08:30:00Z",
        assignee: "u_ada",
        open: false,
    },
    Incident {
        id: "INC-2040",
        title: "Slow catalog search during the sale",
        severity: "sev2",
        service: "search-api",
        opened_at: "2026-03-14T09:15:00Z",
        assignee: "u_grace",
        open: true,
    },
];

#[derive(Serialize)]
struct MyIncidents {
    /// The signed-in user the incidents are assigned to.
    assignee: String,
    /// Open incidents, most severe first.
    incidents: Vec<&'static Incident>,
}

/// Lists the open incidents assigned to the signed-in user, most severe first. Use when the user
/// asks what they are handling ("my incidents", "what's on my plate"). It takes no arguments and
/// never lists anyone else's incidents: the user comes from the session. Returns each incident's
/// id, title, severity (sev1 is the worst), service and opening time (UTC).
#[tool(effect = read, title = "My open incidents")]
async fn list_my_incidents(_: NoInput, ctx: ToolContext) -> Result<MyIncidents, ToolError> {
    let user = signed_in_user(&ctx)?;
    let mut incidents: Vec<&'static Incident> = INCIDENTS
        .iter()
        .filter(|incident| incident.open && incident.assignee == user.principal_id)
        .collect();
    incidents.sort_by_key(|incident| incident.severity);
    Ok(MyIncidents {
        assignee: user.principal_id.clone(),
        incidents,
    })
}
