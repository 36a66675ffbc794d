// The comparison for bench/cost.py: Supabase's stripe-sync-engine behind a bare HTTP server.
// One upsert per verified event before answering. Env: DATABASE_URL, WEBHOOK_SECRET, PORT,
// SYNC_ENGINE_DIR (where npm installed the package; bench/cost.py installs it under .data/).
import http from 'node:http'
import { createRequire } from 'node:module'
import path from 'node:path'

const require = createRequire(path.join(process.env.SYNC_ENGINE_DIR, 'package.json'))
const { StripeSync, runMigrations } = require('@supabase/stripe-sync-engine')

const databaseUrl = process.env.DATABASE_URL
await runMigrations({ databaseUrl, schema: 'stripe' })
const sync = new StripeSync({
  poolConfig: { connectionString: databaseUrl, max: 10 },
  stripeSecretKey: 'sk_test_bench',
  stripeWebhookSecret: process.env.WEBHOOK_SECRET,
  stripeApiVersion: '2023-08-16',
  backfillRelatedEntities: false,
})

const server = http.createServer((req, res) => {
  const chunks = []
  req.on('data', (chunk) => chunks.push(chunk))
  req.on('end', async () => {
    if (req.method === 'GET') return answer(res, 200, { status: 'ok' })
    try {
      await sync.processWebhook(Buffer.concat(chunks), req.headers['stripe-signature'])
      answer(res, 200, {})
    } catch (err) {
      answer(res, err.type === 'StripeSignatureVerificationError' ? 400 : 500, {
        error: String(err.message),
      })
    }
  })
})

function answer(res, status, body) {
  res.writeHead(status, { 'Content-Type': 'application/json' })
  res.end(JSON.stringify(body))
}

server.listen(Number(process.env.PORT), '127.0.0.1')
