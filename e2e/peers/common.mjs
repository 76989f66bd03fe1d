// Shared by the Node peers of the end-to-end suite: configuration from the
// environment, signing keys, accounts, the record of every one-time value a
// peer hands out (so the suite can check none of them reaches a log), and
// request logging that never prints a query string.

import { generateKeyPairSync, randomBytes } from 'node:crypto';

/** A required environment variable. */
export function env(name) {
  const value = process.env[name];
  if (!value) {
    console.error(`missing environment variable ${name}`);
    process.exit(2);
  }
  return value;
}

/** A fresh RS256 signing key, as the JWKS oidc-provider signs with. */
export function signingKeys() {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const jwk = privateKey.export({ format: 'jwk' });
  return { keys: [{ ...jwk, kid: randomBytes(6).toString('hex'), alg: 'RS256', use: 'sig' }] };
}

export function cookieKeys() {
  return [randomBytes(32).toString('base64url')];
}

/** Anyone can sign in under any name (devInteractions asks for a login and
 * any password); the subject is the login, the profile claims derive from it. */
export async function findAccount(_ctx, id) {
  return {
    accountId: id,
    async claims() {
      return {
        sub: id,
        preferred_username: id,
        name: id.replace(/(^|[-.])(\w)/g, (_m, sep, c) => `${sep === '' ? '' : ' '}${c.toUpperCase()}`),
        email: `${id}@example.test`,
        email_verified: true,
      };
    },
  };
}

/**
 * Remembers the values this provider gave out (authorization codes, opaque
 * access and refresh tokens), by account. `GET /__e2e/issued?account=A`
 * answers them. Test-only, loopback-only.
 */
export function recordIssued(provider) {
  const issued = new Map();
  const remember = (kind) => (model) => {
    const account = model.accountId ?? '';
    if (!issued.has(account)) issued.set(account, []);
    issued.get(account).push({ kind, value: model.jti });
  };
  provider.on('authorization_code.saved', remember('authorization_code'));
  provider.on('access_token.saved', remember('access_token'));
  provider.on('refresh_token.saved', remember('refresh_token'));
  provider.use(async (ctx, next) => {
    if (ctx.method === 'GET' && ctx.path === '/__e2e/issued') {
      ctx.body = issued.get(ctx.query.account ?? '') ?? [];
      return;
    }
    await next();
  });
}

/** One line per request, path only: queries carry codes and states. */
export function logRequests(provider, name) {
  provider.use(async (ctx, next) => {
    const started = Date.now();
    try {
      await next();
    } finally {
      console.log(`${name} ${ctx.method} ${ctx.path} ${ctx.status} ${Date.now() - started}ms`);
    }
  });
  provider.on('server_error', (_ctx, err) => console.error(`${name} server_error: ${err.stack ?? err}`));
  for (const event of ['authorization.error', 'grant.error', 'userinfo.error', 'introspection.error', 'revocation.error']) {
    provider.on(event, (_ctx, err) => console.log(`${name} ${event}: ${err.message} ${err.error_description ?? ''}`));
  }
}

/** Exit when the suite goes away: its end of our stdin closes. */
export function exitWithParent() {
  process.stdin.on('end', () => process.exit(0));
  process.stdin.on('error', () => process.exit(0));
  process.stdin.resume();
}
