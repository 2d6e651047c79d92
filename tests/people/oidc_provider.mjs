// A real OpenID Connect provider (the npm package oidc-provider) for the sign-in tests, on
// 127.0.0.1:$PORT. One confidential client, the console, redirecting to $REDIRECT. Its
// development sign-in form takes any login and no password check: the login is the account,
// and the account's email is the login itself (or login@plant.example without an @). The tests
// judge what the console does with the ID token it gets, which is as real as any provider's.
import Provider from 'oidc-provider';

const port = Number(process.env.PORT);
const provider = new Provider(`http://127.0.0.1:${port}`, {
  clients: [{
    client_id: process.env.CLIENT_ID,
    client_secret: process.env.CLIENT_SECRET,
    redirect_uris: [process.env.REDIRECT],
    response_types: ['code'],
    grant_types: ['authorization_code'],
  }],
  async findAccount(ctx, id) {
    const email = id.includes('@') ? id : `${id}@plant.example`;
    const verified = !id.startsWith('unverified');
    return { accountId: id, async claims() { return { sub: id, email, email_verified: verified }; } };
  },
  claims: { openid: ['sub'], email: ['email', 'email_verified'] },
  features: { devInteractions: { enabled: true } },
  ttl: { Interaction: 600, Session: 3600, Grant: 3600, AuthorizationCode: 60, IdToken: 3600, AccessToken: 3600 },
});
provider.listen(port, '127.0.0.1', () => console.log(`oidc-provider listening on ${port}`));
