// The third-party provider of the end-to-end suite, in two parts:
//
// 1. An OAuth 2.0 / OpenID Connect authorization server (oidc-provider) with
//    what an operator's own catalog entry in mcp-connect meets at real providers: opaque
//    access tokens, refresh tokens, client_secret_post at the token
//    endpoint, PKCE, an `iss` on every authorization response (RFC 9207),
//    RFC 7009 revocation and a userinfo endpoint; access tokens live 10 s.
// 2. A small resource API at /api/ on its own port, which knows nothing but
//    a bearer token and checks it by RFC 7662 introspection, like a real
//    resource server in front of an opaque-token issuer.
// 3. On the same port, an OpenAI-like API at /openai/v1/ for a provider
//    connected with an API key: the key (E2E_OPENAI_KEY) as a bearer token,
//    `GET /openai/v1/models` lists models, a wrong key gets OpenAI's 401
//    `invalid_api_key` error.
//
// Clients: E2E_TP_CLIENT_ID (mcp-connect; redirect URI
// `<public_url>/oauth/callback/thirdparty`) and `tp-api` (the API's own
// credentials, for introspection only).
//
// Environment: E2E_TP_PORT, E2E_API_PORT, E2E_MCP_PUBLIC_URL,
// E2E_TP_CLIENT_ID, E2E_TP_CLIENT_SECRET; optional E2E_BIND, E2E_TP_ISSUER,
// E2E_API_BASE, E2E_OPENAI_KEY. Prints "ready <issuer> <api>".

import { createServer } from 'node:http';
import { randomBytes } from 'node:crypto';

import Provider from 'oidc-provider';

import {
  cookieKeys, env, exitWithParent, findAccount, logRequests, recordIssued, signingKeys,
} from './common.mjs';

const port = Number(env('E2E_TP_PORT'));
const apiPort = Number(env('E2E_API_PORT'));
// Behind a TLS proxy (the compose smoke test) the public addresses are the
// proxy's and the peer listens where the proxy can reach it.
const bind = process.env.E2E_BIND ?? '127.0.0.1';
const issuer = process.env.E2E_TP_ISSUER ?? `http://127.0.0.1:${port}`;
const apiBase = process.env.E2E_API_BASE ?? `http://127.0.0.1:${apiPort}/api/`;
const publicUrl = env('E2E_MCP_PUBLIC_URL').replace(/\/$/, '');
const apiClient = { id: 'tp-api', secret: randomBytes(24).toString('base64url') };

const provider = new Provider(issuer, {
  clients: [
    {
      client_id: env('E2E_TP_CLIENT_ID'),
      client_secret: env('E2E_TP_CLIENT_SECRET'),
      token_endpoint_auth_method: 'client_secret_post',
      redirect_uris: [`${publicUrl}/oauth/callback/thirdparty`],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
    },
    {
      client_id: apiClient.id,
      client_secret: apiClient.secret,
      redirect_uris: [],
      grant_types: [],
      response_types: [],
    },
  ],
  jwks: signingKeys(),
  cookies: { keys: cookieKeys() },
  findAccount,
  claims: {
    openid: ['sub'],
    profile: ['name', 'preferred_username'],
    email: ['email', 'email_verified'],
  },
  scopes: ['openid', 'offline_access', 'profile', 'email'],
  pkce: { required: () => true },
  // Like most providers, a refresh token with every grant whose client may
  // refresh (oidc-provider's default wants offline_access + prompt=consent).
  issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed('refresh_token'),
  expiresWithSession: async () => false,
  features: {
    devInteractions: { enabled: true },
    introspection: {
      enabled: true,
      allowedPolicy: async (_ctx, client) => client.clientId === apiClient.id,
    },
    revocation: {
      enabled: true,
      allowedPolicy: async (_ctx, client, token) => token.clientId === client.clientId,
    },
    // No resource indicators: tokens are opaque and good for userinfo.
    resourceIndicators: { enabled: false },
  },
  ttl: {
    // Short-lived, as at many providers: mcp-connect refreshes a token a
    // minute before expiry, or at half its life when that is shorter, so a
    // use five and a half seconds after connecting goes through the refresh
    // grant, and the token it gets still works for the seconds the test
    // then takes to disconnect (a revoked token must be told from an
    // expired one).
    AccessToken: 10,
    AuthorizationCode: 60,
    RefreshToken: 86400,
    IdToken: 3600,
    Interaction: 600,
    Session: 3600,
    Grant: 86400,
  },
});

provider.proxy = issuer.startsWith('https:');
logRequests(provider, 'tp');
recordIssued(provider);
exitWithParent();

/** Asks the authorization server whether `token` is active. */
async function introspect(token) {
  // Directly, not through the proxy: the same process's other listener.
  const response = await fetch(`http://${bind}:${port}/token/introspection`, {
    method: 'POST',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      authorization: `Basic ${Buffer.from(`${apiClient.id}:${apiClient.secret}`).toString('base64')}`,
    },
    body: new URLSearchParams({ token, token_type_hint: 'access_token' }),
  });
  if (!response.ok) throw new Error(`introspection answered ${response.status}`);
  return response.json();
}

function send(res, status, body, headers = {}) {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
}

/** The OpenAI-like API: an API key, not a token this issuer knows. */
function openai(req, res, path) {
  const key = process.env.E2E_OPENAI_KEY;
  if (!key || req.headers.authorization !== `Bearer ${key}`) {
    return send(res, 401, {
      error: {
        message: 'Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys.',
        type: 'invalid_request_error', param: null, code: 'invalid_api_key',
      },
    });
  }
  if (req.method === 'GET' && path === '/openai/v1/models') {
    return send(res, 200, { object: 'list', data: [{ id: 'gpt-e2e', object: 'model', owned_by: 'e2e' }] });
  }
  return send(res, 404, { error: { message: 'Not found', type: 'invalid_request_error', code: null } });
}

const api = createServer(async (req, res) => {
  const path = new URL(req.url, apiBase).pathname;
  const started = Date.now();
  res.on('finish', () => console.log(`api ${req.method} ${path} ${res.statusCode} ${Date.now() - started}ms`));
  if (path.startsWith('/openai/')) return openai(req, res, path);
  const match = /^Bearer ([A-Za-z0-9._~+/-]+=*)$/.exec(req.headers.authorization ?? '');
  if (!match) return send(res, 401, { error: 'invalid_request' }, { 'www-authenticate': 'Bearer' });
  let info;
  try {
    info = await introspect(match[1]);
  } catch (e) {
    console.error(`api introspection failed: ${e.message}`);
    return send(res, 502, { error: 'introspection_failed' });
  }
  if (!info.active) {
    return send(res, 401, { error: 'invalid_token' }, { 'www-authenticate': 'Bearer error="invalid_token"' });
  }
  if (req.method === 'GET' && path === '/api/me') {
    return send(res, 200, { id: info.sub, login: info.sub, scope: info.scope, client_id: info.client_id });
  }
  return send(res, 404, { error: 'not_found' });
});

provider.listen(port, bind, () => {
  api.listen(apiPort, bind, () => console.log(`ready ${issuer} ${apiBase}`));
});
