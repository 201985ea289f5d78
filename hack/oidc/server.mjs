// A small, real OpenID Connect provider for local development and tests, started by hack/oidc.sh.
// Built on oidc-provider (panva). Everything lives in memory; signing and cookie keys are made
// fresh at every start, so nothing secret is kept in the repository.
//
// Configuration (environment):
//   OIDC_PORT            port on 127.0.0.1 (default 9400); the issuer is http://127.0.0.1:$OIDC_PORT
//   OIDC_CLIENT_ID       the one (confidential) client, authenticated with client_secret_basic
//   OIDC_CLIENT_SECRET
//   OIDC_REDIRECT_URIS   comma separated
//   OIDC_USERS_FILE      JSON: {"<username>": {"password", "email", "name", "groups": [...]}},
//                        read again at every login and every claims lookup
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import http from 'node:http';

import Provider, { interactionPolicy } from 'oidc-provider';

const port = Number(process.env.OIDC_PORT || 9400);
const issuer = `http://127.0.0.1:${port}`;
const usersFile = process.env.OIDC_USERS_FILE;
const clientId = process.env.OIDC_CLIENT_ID;
const clientSecret = process.env.OIDC_CLIENT_SECRET;
const redirectUris = (process.env.OIDC_REDIRECT_URIS || '').split(',').map((u) => u.trim()).filter(Boolean);

const missing = Object.entries({
  OIDC_CLIENT_ID: clientId, OIDC_CLIENT_SECRET: clientSecret, OIDC_REDIRECT_URIS: redirectUris.length, OIDC_USERS_FILE: usersFile,
}).filter(([, v]) => !v).map(([k]) => k);
if (missing.length) {
  console.error(`[oidc] missing environment: ${missing.join(', ')}`);
  process.exit(2);
}

const log = (msg) => console.log(`${new Date().toISOString()} ${msg}`);

function loadUsers() {
  try {
    const users = JSON.parse(readFileSync(usersFile, 'utf8'));
    return users && typeof users === 'object' && !Array.isArray(users) ? users : {};
  } catch (err) {
    log(`cannot read ${usersFile}: ${err.message}`);
    return {};
  }
}

function findUser(username) {
  const users = loadUsers();
  return typeof username === 'string' && Object.hasOwn(users, username) ? users[username] : undefined;
}

const signingKey = {
  ...generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ format: 'jwk' }),
  kid: randomBytes(8).toString('hex'),
  alg: 'RS256',
  use: 'sig',
};

// The default policy, plus: a session whose user has since left the users file signs in again
// (oidc-provider would otherwise fail with a server_error on the consent checks).
const policy = interactionPolicy.base();
policy.get('login').checks.add(new interactionPolicy.Check(
  'account_gone',
  'the signed-in End-User no longer exists',
  (ctx) => Boolean(ctx.oidc.session.accountId && !ctx.oidc.account),
), 1);

const provider = new Provider(issuer, {
  clients: [{
    client_id: clientId,
    client_secret: clientSecret,
    redirect_uris: redirectUris,
    grant_types: ['authorization_code'],
    response_types: ['code'],
    token_endpoint_auth_method: 'client_secret_basic',
  }],
  // Only advertise what the client uses, so relying parties that pick a method from discovery
  // (django-allauth does) choose HTTP basic.
  clientAuthMethods: ['client_secret_basic'],
  scopes: ['openid'],
  claims: {
    openid: ['sub'],
    profile: ['name', 'preferred_username'],
    email: ['email', 'email_verified'],
    groups: ['groups'],
  },
  // Put the claims of the granted scopes into the ID token too, not only into userinfo.
  conformIdTokenClaims: false,
  pkce: { required: () => true },
  features: {
    devInteractions: { enabled: false },
  },
  interactions: { policy, url: (ctx, interaction) => `/interaction/${interaction.uid}` },
  ttl: {
    AccessToken: 3600, AuthorizationCode: 60, IdToken: 3600, Interaction: 3600, Session: 86400, Grant: 86400,
  },
  cookies: { keys: [randomBytes(32).toString('base64url')] },
  jwks: { keys: [signingKey] },
  async findAccount(ctx, sub) {
    if (!findUser(sub)) return undefined;
    return {
      accountId: sub,
      async claims() {
        const user = findUser(sub) || {};
        return {
          sub,
          preferred_username: sub,
          name: user.name ?? sub,
          email: user.email,
          email_verified: user.email_verified ?? Boolean(user.email),
          groups: Array.isArray(user.groups) ? user.groups : [],
        };
      },
    };
  },
});

provider.on('server_error', (ctx, err) => log(`server_error: ${err.stack || err}`));

const escapeHtml = (s) => String(s ?? '').replace(/[&<>"']/g, (c) => ({
  '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;',
}[c]));

function loginPage(uid, { login = '', error = '' } = {}) {
  return `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Sign in</title></head>
<body>
<h1>Sign in</h1>
${error ? `<p class="error" role="alert">${escapeHtml(error)}</p>` : ''}
<form method="post" action="/interaction/${escapeHtml(uid)}/login" autocomplete="off">
  <label for="login">Username</label>
  <input id="login" name="login" type="text" value="${escapeHtml(login)}" required autofocus>
  <label for="password">Password</label>
  <input id="password" name="password" type="password" required>
  <button id="submit" type="submit">Sign in</button>
</form>
</body>
</html>
`;
}

function send(res, status, body, type = 'text/html; charset=utf-8') {
  res.writeHead(status, { 'Content-Type': type, 'Cache-Control': 'no-store' });
  res.end(body);
}

async function readForm(req) {
  const chunks = [];
  let size = 0;
  for await (const chunk of req) {
    size += chunk.length;
    if (size > 64 * 1024) throw new Error('request body too large');
    chunks.push(chunk);
  }
  return new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
}

// Consent is implicit (the only client is first party): grant what is asked and carry on.
async function grantConsent(req, res, { grantId, session, params, prompt: { details } }) {
  const grant = grantId
    ? await provider.Grant.find(grantId)
    : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
  if (details.missingOIDCScope) grant.addOIDCScope(details.missingOIDCScope.join(' '));
  if (details.missingOIDCClaims) grant.addOIDCClaims(details.missingOIDCClaims);
  for (const [indicator, scope] of Object.entries(details.missingResourceScopes || {})) {
    grant.addResourceScope(indicator, scope.join(' '));
  }
  await provider.interactionFinished(req, res, { consent: { grantId: await grant.save() } }, {
    mergeWithLastSubmission: true,
  });
}

async function interaction(req, res, path) {
  const [, uid, action] = path.split('/').slice(1); // /interaction/<uid>[/login]
  const details = await provider.interactionDetails(req, res);
  if (details.uid !== uid) return send(res, 400, 'interaction mismatch\n', 'text/plain');
  const { prompt } = details;

  if (prompt.name === 'consent') return grantConsent(req, res, details);
  if (prompt.name !== 'login') return send(res, 501, `unsupported prompt ${prompt.name}\n`, 'text/plain');

  if (req.method === 'GET' && !action) return send(res, 200, loginPage(uid));
  if (req.method === 'POST' && action === 'login') {
    const form = await readForm(req);
    const login = form.get('login') || '';
    const user = findUser(login);
    if (!user || typeof user.password !== 'string' || user.password !== (form.get('password') || '')) {
      log(`login failed user=${JSON.stringify(login)} client=${details.params.client_id}`);
      return send(res, 200, loginPage(uid, { login, error: 'Invalid username or password' }));
    }
    log(`login ok user=${JSON.stringify(login)} client=${details.params.client_id} groups=${JSON.stringify(user.groups || [])}`);
    return provider.interactionFinished(req, res, { login: { accountId: login } }, {
      mergeWithLastSubmission: false,
    });
  }
  return send(res, 405, 'method not allowed\n', 'text/plain');
}

const oidc = provider.callback();
const server = http.createServer((req, res) => {
  const path = new URL(req.url, issuer).pathname;
  if (!/^\/interaction\/[^/]+(\/login)?\/?$/.test(path)) return oidc(req, res);
  interaction(req, res, path.replace(/\/$/, '')).catch((err) => {
    // Mostly an expired or missing interaction cookie: start the sign-in again from the client.
    log(`interaction error: ${err.message}`);
    if (!res.headersSent) send(res, 400, `${escapeHtml(err.message)}\n`, 'text/plain; charset=utf-8');
  });
});

server.listen(port, '127.0.0.1', () => {
  log(`OpenID provider ${issuer} client=${clientId} redirect_uris=${redirectUris.join(',')} users=${usersFile}`);
});

for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, () => process.exit(0));
