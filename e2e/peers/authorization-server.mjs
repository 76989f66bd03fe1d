// The MCP authorization server of the end-to-end suite: oidc-provider, an
// OpenID Certified implementation, in the role a company's identity provider
// plays for mcp-connect. It issues RFC 9068 JWT access tokens for exactly one
// resource, the server's `<public_url>/mcp`, and signs people in on the
// server's web pages (the client E2E_WEB_CLIENT_ID, a confidential client
// whose redirect URI is `<public_url>/auth/callback`).
//
// Clients:
//   E2E_WEB_CLIENT_ID   mcp-connect's web sign-in (authorization code, secret)
//   e2e-mcp-client      the MCP client's tokens: public, PKCE, loopback
//                       redirect; the suite drives its sign-in over HTTP
//   e2e-mcp-client-b    a second MCP client of the same people, registered
//                       the same way (per-client grants: it is asked first)
//
// Environment: E2E_AS_PORT, E2E_MCP_PUBLIC_URL, E2E_WEB_CLIENT_ID,
// E2E_WEB_CLIENT_SECRET; optional E2E_BIND, E2E_AS_ISSUER. Prints "ready <issuer>" when listening.

import Provider, { errors } from 'oidc-provider';

import {
  cookieKeys, env, exitWithParent, findAccount, logRequests, recordIssued, signingKeys,
} from './common.mjs';

const port = Number(env('E2E_AS_PORT'));
// Behind a TLS proxy (the compose smoke test) the issuer is the proxy's
// https address and the peer listens where the proxy can reach it.
const bind = process.env.E2E_BIND ?? '127.0.0.1';
const issuer = process.env.E2E_AS_ISSUER ?? `http://127.0.0.1:${port}`;
const publicUrl = env('E2E_MCP_PUBLIC_URL').replace(/\/$/, '');
const mcpResource = `${publicUrl}/mcp`;
const webClientId = env('E2E_WEB_CLIENT_ID');
export const MCP_CLIENT_ID = 'e2e-mcp-client';
export const MCP_CLIENT_B_ID = 'e2e-mcp-client-b';
export const MCP_SCOPE = 'mcp:tools';

const provider = new Provider(issuer, {
  clients: [
    {
      client_id: webClientId,
      client_secret: env('E2E_WEB_CLIENT_SECRET'),
      redirect_uris: [`${publicUrl}/auth/callback`],
      grant_types: ['authorization_code'],
      response_types: ['code'],
    },
    ...[MCP_CLIENT_ID, MCP_CLIENT_B_ID].map((clientId) => ({
      client_id: clientId,
      application_type: 'native',
      token_endpoint_auth_method: 'none',
      redirect_uris: ['http://127.0.0.1/callback'],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
    })),
  ],
  jwks: signingKeys(),
  cookies: { keys: cookieKeys() },
  findAccount,
  claims: {
    openid: ['sub'],
    profile: ['name', 'preferred_username'],
    email: ['email', 'email_verified'],
  },
  scopes: ['openid', 'offline_access', MCP_SCOPE],
  // The ID token carries the profile claims the scopes asked for (mcp-connect
  // shows the name); the strict default keeps them for userinfo only.
  conformIdTokenClaims: false,
  pkce: { required: () => true },
  features: {
    devInteractions: { enabled: true },
    resourceIndicators: {
      enabled: true,
      // An MCP client that names no resource still gets a token for ours;
      // the web sign-in gets none (its access token is only for userinfo).
      defaultResource: (_ctx, client) => (client.clientId === webClientId ? undefined : mcpResource),
      useGrantedResource: () => true,
      getResourceServerInfo: (_ctx, resource) => {
        if (resource !== mcpResource) throw new errors.InvalidTarget();
        return {
          scope: MCP_SCOPE,
          audience: mcpResource,
          accessTokenTTL: 3600,
          accessTokenFormat: 'jwt',
          jwt: { sign: { alg: 'RS256' } },
        };
      },
    },
  },
  ttl: {
    AccessToken: 3600,
    AuthorizationCode: 60,
    IdToken: 3600,
    Interaction: 600,
    Session: 3600,
    Grant: 3600,
  },
});

// Trust the proxy's X-Forwarded-Proto/Host for the URLs it builds.
provider.proxy = issuer.startsWith('https:');
logRequests(provider, 'as');
recordIssued(provider);
exitWithParent();

provider.listen(port, bind, () => console.log(`ready ${issuer}`));
