// A real OpenID Connect provider for the login tests: panva's certified oidc-provider (npm, pinned in
// package.json), configured from a JSON file and listening on 127.0.0.1. Its own development login form
// (any password) and consent step are what the browser goes through; the users and their claims come
// from the config file, so a test decides who is in which group.
//
//   node tests/oidc/idp.mjs CONFIG.json
//
// CONFIG: {"port": N, "issuer": "http://127.0.0.1:N", "clients": [...oidc-provider client metadata...],
//          "users": {"alice": {"email": "...", "groups": [...], ...}, ...}}
// Optional, for the API tests: "jwks" (the signing keys, so a test can rotate them), "resource" (the API's
// audience: access tokens for it are JWTs, also from the client_credentials grant), a client's "groups" (the
// groups claim of its client-credentials tokens) and "token_ttl" (seconds its access tokens live).
// Prints "ready <issuer>" on stdout once it listens.
import { readFileSync } from 'node:fs';
import Provider from 'oidc-provider';

const config = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const users = config.users || {};

const page = (title, body) => `<!DOCTYPE html><html><head><meta charset="utf-8"><title>${title}</title></head>
<body><h1>${title}</h1>${body}</body></html>`;

// Access tokens for the API (a resource indicator) are JWTs carrying the claims the API's grants read.
const apiFeatures = config.resource ? {
  clientCredentials: { enabled: true },
  resourceIndicators: {
    enabled: true,
    defaultResource: () => config.resource,
    useGrantedResource: () => true,
    getResourceServerInfo: (ctx, resourceIndicator, client) => ({
      scope: 'api:read',
      audience: resourceIndicator,
      accessTokenTTL: client.token_ttl || 3600,
      accessTokenFormat: 'jwt',
    }),
  },
} : {};

const extraTokenClaims = async (ctx, token) => {
  if (token.accountId) {
    const user = users[token.accountId] || {};
    const claims = {};
    for (const name of ['email', 'email_verified', 'groups', 'realm_access']) {
      if (Object.hasOwn(user, name)) claims[name] = user[name];
    }
    return claims;
  }
  const client = ctx.oidc.client;
  return client && client.groups ? { groups: client.groups } : undefined;
};

const provider = new Provider(config.issuer, {
  clients: config.clients,
  ...(config.jwks ? { jwks: config.jwks } : {}),
  extraClientMetadata: { properties: ['groups', 'token_ttl'] },
  extraTokenClaims,
  // Claims by scope. Keycloak-style roles sit under realm_access.roles, Okta/Entra-style groups in "groups".
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['name', 'preferred_username'],
    groups: ['groups', 'realm_access'],
  },
  scopes: ['openid', 'email', 'profile', 'groups'],
  // Put the scope's claims into the ID token: Streamlit reads the ID token only, never UserInfo.
  conformIdTokenClaims: false,
  findAccount: async (ctx, id) => {
    if (!Object.hasOwn(users, id)) return undefined;
    return { accountId: id, claims: async () => ({ sub: id, ...users[id] }) };
  },
  cookies: { keys: ['fleetview-test-only-cookie-key'] },
  features: {
    ...apiFeatures,
    devInteractions: { enabled: true },
    rpInitiatedLogout: {
      enabled: true,
      // The default pages load web fonts from the internet; these say the same with nothing external.
      logoutSource: async (ctx, form) => {
        ctx.body = page('Logout Request', `${form}
          <button autofocus type="submit" form="op.logoutForm" value="yes" name="logout">Yes, sign me out</button>
          <button type="submit" form="op.logoutForm">No, stay signed in</button>`);
      },
      postLogoutSuccessSource: async (ctx) => { ctx.body = page('Sign-out Success', '<p>Signed out.</p>'); },
    },
  },
  renderError: async (ctx, out) => {
    ctx.type = 'html';
    ctx.body = page('oops! something went wrong', `<pre>${JSON.stringify(out)}</pre>`);
  },
  ttl: { Session: 86400, Interaction: 3600, Grant: 86400, AccessToken: 3600, IdToken: 3600, AuthorizationCode: 600 },
});

const server = provider.listen(config.port, '127.0.0.1', () => {
  process.stdout.write(`ready ${config.issuer}\n`);
});
const stop = () => server.close(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
