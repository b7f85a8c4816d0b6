"""SharePoint Online connector: Microsoft Graph + SharePoint REST (README "SharePoint")."""
